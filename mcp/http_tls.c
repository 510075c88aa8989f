/* http_tls.c - the HTTP server's optional TLS layer: mbedTLS over the connection's byte
 * stream (our own send and receive callbacks, so libuv keeps the socket), and loading the
 * certificate and key. */
#include "http_conn_internal.h"

#include <mbedtls/error.h>
#include <string.h>

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    mcp__hconn_t *c = ctx;
    return mcp__hconn_raw_write(c, (const char *)buf, len) == 0 ? (int)len
                                                                : MBEDTLS_ERR_SSL_INTERNAL_ERROR;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    mcp__hconn_t *c = ctx;
    if (c->tin_off == ptc_buf_len(&c->tin)) return MBEDTLS_ERR_SSL_WANT_READ;
    size_t n = ptc_buf_len(&c->tin) - c->tin_off;
    if (n > len) n = len;
    memcpy(buf, ptc_buf_cstr(&c->tin) + c->tin_off, n);
    c->tin_off += n;
    return (int)n;
}

int mcp__hconn_tls_begin(mcp__hconn_t *c)
{
    mbedtls_ssl_init(&c->ssl);
    c->tls_on = true;
    if (mbedtls_ssl_setup(&c->ssl, &c->hs->conf) != 0) return MCP_ETLS;
    mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
    c->phase = MCP__PH_HANDSHAKE;
    return MCP_OK;
}

void mcp__hconn_tls_in(mcp__hconn_t *c, const char *data, size_t n)
{
    ptc_buf_consume(&c->tin, c->tin_off);
    c->tin_off = 0;
    if (ptc_buf_append(&c->tin, data, n) < 0) {
        mcp__hconn_close(c, true);
        return;
    }
    if (!c->handshake_done) {
        int ret = mbedtls_ssl_handshake(&c->ssl);
        if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE) return;
        if (ret != 0) {
            char err[160];
            mbedtls_strerror(ret, err, sizeof err);
            mcp_log(c->hs->lg, MCP_LOG_INFO, "https: TLS handshake with a client failed: %s", err);
            mcp__hconn_close(c, true);
            return;
        }
        c->handshake_done = true;
        c->phase = MCP__PH_HEADERS;
        uv_timer_start(&c->timer, mcp__hconn_on_timer, c->hs->o.header_timeout_ms, 0);
    }
    unsigned char plain[16384];
    while (!c->closing) {
        int r = mbedtls_ssl_read(&c->ssl, plain, sizeof plain);
        if (r > 0) {
            mcp__hconn_plain_in(c, (const char *)plain, (size_t)r);
            continue;
        }
        if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) break;
        if (r == 0 || r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) {
            c->read_eof = true;
            mcp__hconn_process(c);
            break;
        }
        mcp__hconn_close(c, true);
        break;
    }
}

static void tls_log_error(mcp_http_server_t *hs, const char *what, const char *file, int ret)
{
    char err[200];
    mbedtls_strerror(ret, err, sizeof err);
    mcp_log(hs->lg, MCP_LOG_ERROR, "https: cannot load the %s %s: %s (give a PEM file)", what, file,
            err);
}

int mcp__http_setup_tls(mcp_http_server_t *hs, const mcp_http_server_opts_t *o)
{
    int ret = mbedtls_x509_crt_parse_file(&hs->cert, o->tls_cert_file);
    if (ret != 0) {
        tls_log_error(hs, "certificate (--tls-cert)", o->tls_cert_file, ret);
        return MCP_EINVAL;
    }
    ret = mbedtls_pk_parse_keyfile(&hs->key, o->tls_key_file, NULL);
    if (ret != 0) {
        tls_log_error(hs, "private key (--tls-key)", o->tls_key_file, ret);
        return MCP_EINVAL;
    }
    ret = mbedtls_ssl_config_defaults(&hs->conf, MBEDTLS_SSL_IS_SERVER,
                                      MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (ret == 0) ret = mbedtls_ssl_conf_own_cert(&hs->conf, &hs->cert, &hs->key);
    if (ret != 0) {
        tls_log_error(hs, "certificate and key pair", o->tls_cert_file, ret);
        return MCP_EINVAL;
    }
    mbedtls_ssl_conf_rng(&hs->conf, mbedtls_ctr_drbg_random, &hs->drbg);
    mbedtls_ssl_conf_min_version(&hs->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    hs->tls = true;
    return MCP_OK;
}
