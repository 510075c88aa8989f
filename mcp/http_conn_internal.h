/*
 * http_conn_internal.h - one connection of the HTTP server, shared by the files that handle it:
 * http_conn.c (output, closing, reading), http_request.c (parsing, the checks, timeouts),
 * http_tls.c (mbedTLS over the byte stream) and http_server.c (the listener). The endpoints
 * (transport_http.c) see connections only through http_server_internal.h.
 */
#ifndef PTC_MCP_HTTP_CONN_INTERNAL_H
#define PTC_MCP_HTTP_CONN_INTERNAL_H

#include "http_server_internal.h"

#include <http_parser.h>

/* Bytes read from a socket at a time (one buffer per server). */
#define MCP__HTTP_READ_CHUNK 65536

typedef enum mcp__hphase {
    MCP__PH_HANDSHAKE, /* TLS handshake */
    MCP__PH_IDLE,      /* keep-alive: between requests */
    MCP__PH_HEADERS,   /* reading the request line and headers */
    MCP__PH_BODY,      /* reading the body */
    MCP__PH_WAIT,      /* request complete; the answer will come (JSON) */
    MCP__PH_STREAM,    /* an event-stream response is open */
    MCP__PH_LINGER,    /* closing: draining input */
} mcp__hphase_t;

typedef struct mcp__hhdr {
    size_t name, value; /* offsets into hbuf of NUL-terminated strings */
} mcp__hhdr_t;

struct mcp__hconn {
    mcp_http_server_t *hs;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    int handles;
    bool closing, shutting;
    mcp__hphase_t phase;
    http_parser parser;

    ptc_buf_t in; /* plaintext not parsed yet */
    bool reading, read_eof, processing, resume;

    bool tls_on, handshake_done;
    mbedtls_ssl_context ssl;
    ptc_buf_t tin;  /* ciphertext not consumed by mbedTLS yet ... */
    size_t tin_off; /* ... from here on */

    ptc_buf_t hbuf; /* URL, then header names and values, NUL-terminated */
    mcp__hhdr_t *hdrs;
    size_t n_hdrs;
    bool in_value;
    size_t url_len;
    ptc_buf_t body;
    int fail_status;
    bool keep_alive;

    bool chunked, close_after; /* close_after: the response says Connection: close */
    bool finishing;            /* mcp__hconn_finish waits for the queued output */
    size_t out_queued;
    void *owner;
    mcp__hconn_t *prev, *next;
};

/* http_conn.c */
/* Sets up c's buffers with their caps (a new connection, allocated zeroed). */
void mcp__hconn_bufs_init(mcp__hconn_t *c);
/* Queues bytes on the socket as they are (ciphertext with TLS). */
int mcp__hconn_raw_write(mcp__hconn_t *c, const char *data, size_t len);
/* Writes response bytes (through TLS when on); closes the connection on failure or when the
 * client is too far behind. */
int mcp__hconn_write(mcp__hconn_t *c, const char *data, size_t len);
/* Forgets the request just handled (its buffers are kept for the next, small ones at least). */
void mcp__hconn_reset_request(mcp__hconn_t *c);
/* Ends the connection gracefully: after the queued output, half-close and linger. */
void mcp__hconn_finish(mcp__hconn_t *c);
/* How many lines of the request carry header `name`. */
size_t mcp__hconn_header_lines(const mcp__hconn_t *c, const char *name);
/* Closes at once; tell_owner: the owner of a pending response hears of it. */
void mcp__hconn_close(mcp__hconn_t *c, bool tell_owner);
/* Takes plaintext input (held while a response is pending, up to the limit). */
void mcp__hconn_plain_in(mcp__hconn_t *c, const char *data, size_t n);
void mcp__hconn_start_reading(mcp__hconn_t *c);

/* http_request.c */
/* Parses and dispatches what input is held, one request at a time. */
void mcp__hconn_process(mcp__hconn_t *c);
/* A response ended: the connection waits for the next request (or closes). */
void mcp__hconn_next(mcp__hconn_t *c);
/* The connection's one timer: header, body, idle and linger timeouts, and resuming input. */
void mcp__hconn_on_timer(uv_timer_t *t);

/* http_tls.c */
/* Sets the connection up for a TLS handshake; MCP_ETLS on failure (close it). */
int mcp__hconn_tls_begin(mcp__hconn_t *c);
/* Takes ciphertext input: the handshake, then decrypted bytes to mcp__hconn_plain_in. */
void mcp__hconn_tls_in(mcp__hconn_t *c, const char *data, size_t n);
/* Loads --tls-cert and --tls-key into the server's TLS config (errors logged). */
int mcp__http_setup_tls(mcp_http_server_t *hs, const mcp_http_server_opts_t *o);

#endif /* PTC_MCP_HTTP_CONN_INTERNAL_H */
