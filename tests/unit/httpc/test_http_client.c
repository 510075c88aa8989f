/*
 * test_http_client.c - the outbound HTTP(S) client against local servers.
 *
 * The servers run in threads of this process on 127.0.0.1 (ephemeral ports): one plain HTTP,
 * and three TLS ones whose certificates are made at test time with mbedTLS (a test CA, a
 * second CA the client does not trust, and a certificate for another host name). Each server
 * answers one connection at a time and chooses its answer by the request path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "httpc.h"
#include "url.h"

#include <mbedtls/bignum.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#if MBEDTLS_VERSION_NUMBER >= 0x03000000 && defined(MBEDTLS_PSA_CRYPTO_C)
#include <psa/crypto.h>
#endif

/* Cap on response bodies for the client under test (the /big answers exceed it). */
#define TEST_BODY_CAP 1000
/* Generous timeouts: only the timeout test relies on one firing. */
#define TEST_TIMEOUT_MS       5000
#define TEST_SHORT_TIMEOUT_MS 300
/* A server gives up on a silent client after this long, so a broken test cannot hang it. */
#define SERVER_IDLE_S 5
#define MAX_REQUEST   65536

/* ---------------------------------------------------------------------------------------- */
/* Test PKI                                                                                  */

typedef struct pki {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_pk_context ca_key, rogue_key, srv_key;
    char *ca_pem;        /* trusted by the client */
    char *srv_pem;       /* CN=localhost, from the CA */
    char *wrong_pem;     /* CN=wrong.example, from the CA */
    char *rogue_srv_pem; /* CN=localhost, from an untrusted CA */
    char ca_path[256];
} pki_t;

static void gen_key(pki_t *p, mbedtls_pk_context *pk)
{
    mbedtls_pk_init(pk);
    assert_int_equal(mbedtls_pk_setup(pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)), 0);
    assert_int_equal(mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*pk),
                                         mbedtls_ctr_drbg_random, &p->drbg),
                     0);
}

static char *make_cert(pki_t *p, mbedtls_pk_context *subject_key, const char *subject,
                       mbedtls_pk_context *issuer_key, const char *issuer, bool is_ca, int serial)
{
    mbedtls_x509write_cert crt;
    mbedtls_x509write_crt_init(&crt);
    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, subject_key);
    mbedtls_x509write_crt_set_issuer_key(&crt, issuer_key);
    assert_int_equal(mbedtls_x509write_crt_set_subject_name(&crt, subject), 0);
    assert_int_equal(mbedtls_x509write_crt_set_issuer_name(&crt, issuer), 0);
#if MBEDTLS_VERSION_NUMBER >= 0x03040000
    unsigned char sn[1] = {(unsigned char)serial};
    assert_int_equal(mbedtls_x509write_crt_set_serial_raw(&crt, sn, sizeof sn), 0);
#else
    mbedtls_mpi sn;
    mbedtls_mpi_init(&sn);
    assert_int_equal(mbedtls_mpi_lset(&sn, serial), 0);
    assert_int_equal(mbedtls_x509write_crt_set_serial(&crt, &sn), 0);
    mbedtls_mpi_free(&sn);
#endif
    assert_int_equal(mbedtls_x509write_crt_set_validity(&crt, "20200101000000", "20991231235959"),
                     0);
    assert_int_equal(mbedtls_x509write_crt_set_basic_constraints(&crt, is_ca ? 1 : 0, -1), 0);
    if (is_ca)
        assert_int_equal(mbedtls_x509write_crt_set_key_usage(&crt, MBEDTLS_X509_KU_KEY_CERT_SIGN |
                                                                       MBEDTLS_X509_KU_CRL_SIGN),
                         0);
    unsigned char *pem = calloc(1, 4096);
    assert_non_null(pem);
    assert_int_equal(mbedtls_x509write_crt_pem(&crt, pem, 4096, mbedtls_ctr_drbg_random, &p->drbg),
                     0);
    mbedtls_x509write_crt_free(&crt);
    return (char *)pem;
}

static void pki_make(pki_t *p)
{
    mbedtls_entropy_init(&p->entropy);
    mbedtls_ctr_drbg_init(&p->drbg);
    assert_int_equal(mbedtls_ctr_drbg_seed(&p->drbg, mbedtls_entropy_func, &p->entropy, NULL, 0),
                     0);
    gen_key(p, &p->ca_key);
    gen_key(p, &p->rogue_key);
    gen_key(p, &p->srv_key);
    const char *ca = "CN=ptc-mcp test CA,O=ptc-mcp tests";
    const char *rogue = "CN=ptc-mcp untrusted CA,O=ptc-mcp tests";
    p->ca_pem = make_cert(p, &p->ca_key, ca, &p->ca_key, ca, true, 1);
    p->srv_pem =
        make_cert(p, &p->srv_key, "CN=localhost,O=ptc-mcp tests", &p->ca_key, ca, false, 2);
    p->wrong_pem =
        make_cert(p, &p->srv_key, "CN=wrong.example,O=ptc-mcp tests", &p->ca_key, ca, false, 3);
    p->rogue_srv_pem =
        make_cert(p, &p->srv_key, "CN=localhost,O=ptc-mcp tests", &p->rogue_key, rogue, false, 4);

    const char *tmp = getenv("TMPDIR");
    snprintf(p->ca_path, sizeof p->ca_path, "%s/ptc-http-ca-XXXXXX", tmp ? tmp : "/tmp");
    int fd = mkstemp(p->ca_path);
    assert_true(fd >= 0);
    size_t len = strlen(p->ca_pem);
    assert_int_equal(write(fd, p->ca_pem, len), (ssize_t)len);
    close(fd);
}

static void pki_free(pki_t *p)
{
    unlink(p->ca_path);
    free(p->ca_pem);
    free(p->srv_pem);
    free(p->wrong_pem);
    free(p->rogue_srv_pem);
    mbedtls_pk_free(&p->ca_key);
    mbedtls_pk_free(&p->rogue_key);
    mbedtls_pk_free(&p->srv_key);
    mbedtls_ctr_drbg_free(&p->drbg);
    mbedtls_entropy_free(&p->entropy);
}

/* ---------------------------------------------------------------------------------------- */
/* Local servers                                                                             */

typedef struct server {
    int lfd;
    int stop[2]; /* a byte on stop[1] ends the accept loop */
    uint16_t port;
    pthread_t thread;
    bool tls;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt crt;
    mbedtls_ssl_config conf;
    atomic_int requests; /* requests read completely */
} server_t;

typedef struct conn {
    server_t *srv;
    int fd;
    mbedtls_ssl_context ssl;
} conn_t;

static int fd_send(void *ctx, const unsigned char *buf, size_t len)
{
    ssize_t n = send(*(int *)ctx, buf, len, MSG_NOSIGNAL);
    return n < 0 ? MBEDTLS_ERR_SSL_INTERNAL_ERROR : (int)n;
}

static int fd_recv(void *ctx, unsigned char *buf, size_t len)
{
    ssize_t n = recv(*(int *)ctx, buf, len, 0);
    return n < 0 ? MBEDTLS_ERR_SSL_INTERNAL_ERROR : (int)n;
}

/* Returns bytes read, 0 at EOF, < 0 on error. */
static ssize_t conn_read(conn_t *c, char *buf, size_t len)
{
    if (!c->srv->tls) return recv(c->fd, buf, len, 0);
    int n = mbedtls_ssl_read(&c->ssl, (unsigned char *)buf, len);
    if (n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) return 0;
    return n;
}

static bool conn_write(conn_t *c, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = c->srv->tls ? mbedtls_ssl_write(&c->ssl, (const unsigned char *)buf, len)
                                : send(c->fd, buf, len, MSG_NOSIGNAL);
        if (n <= 0) return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

static bool conn_str(conn_t *c, const char *s)
{
    return conn_write(c, s, strlen(s));
}

/* Reads one request: head and Content-Length body. Returns its length or -1. */
static ssize_t read_request(conn_t *c, char *buf, size_t cap, size_t *head_len)
{
    size_t len = 0;
    char *end = NULL;
    while (end == NULL) {
        if (len + 1 >= cap) return -1;
        ssize_t n = conn_read(c, buf + len, cap - 1 - len);
        if (n <= 0) return -1;
        len += (size_t)n;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    *head_len = (size_t)(end + 4 - buf);
    size_t body = 0;
    const char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (cl != NULL && cl < end) body = strtoul(cl + 17, NULL, 10);
    while (len < *head_len + body) {
        if (len + 1 >= cap) return -1;
        ssize_t n = conn_read(c, buf + len, cap - 1 - len);
        if (n <= 0) return -1;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return (ssize_t)len;
}

static void header_value(const char *req, const char *name, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\r\n%s:", name);
    const char *h = strcasestr(req, pat);
    out[0] = '\0';
    if (h == NULL) return;
    h += strlen(pat);
    while (*h == ' ')
        h++;
    size_t n = strcspn(h, "\r\n");
    if (n >= cap) n = cap - 1;
    memcpy(out, h, n);
    out[n] = '\0';
}

static void answer(conn_t *c, const char *req, size_t head_len)
{
    char method[16] = "", path[256] = "";
    size_t ml = strcspn(req, " ");
    if (ml < sizeof method) {
        memcpy(method, req, ml);
        method[ml] = '\0';
        const char *p = req + ml + (req[ml] == ' ');
        size_t pl = strcspn(p, " \r\n");
        if (pl < sizeof path) {
            memcpy(path, p, pl);
            path[pl] = '\0';
        }
    }
    char reply[1024];
    if (strcmp(path, "/hello") == 0) {
        conn_str(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n"
                    "hello");
    } else if (strcmp(path, "/echo") == 0) {
        /* Reflects what the client sent, so the test can check the request it built. */
        char host[128], conn_hdr[64], body[512];
        header_value(req, "Host", host, sizeof host);
        header_value(req, "Connection", conn_hdr, sizeof conn_hdr);
        snprintf(body, sizeof body, "%s host=%s connection=%s body=%s", method, host, conn_hdr,
                 req + head_len);
        snprintf(reply, sizeof reply,
                 "HTTP/1.1 201 Created\r\nContent-Type: application/json; charset=utf-8\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 strlen(body), body);
        conn_str(c, reply);
    } else if (strcmp(path, "/chunked") == 0) {
        conn_str(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n");
        conn_str(c, "5\r\nhello\r\n");
        conn_str(c, "1\r\n \r\n");
        conn_str(c, "5;ext=1\r\nworld\r\n");
        conn_str(c, "0\r\n\r\n");
    } else if (strcmp(path, "/until-close") == 0) {
        conn_str(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nread until the end");
    } else if (strcmp(path, "/redirect") == 0) {
        conn_str(c, "HTTP/1.1 302 Found\r\nLocation: http://elsewhere.invalid/next\r\n"
                    "Content-Length: 0\r\n\r\n");
    } else if (strcmp(path, "/big") == 0 || strcmp(path, "/big-until-close") == 0) {
        bool announced = strcmp(path, "/big") == 0;
        snprintf(reply, sizeof reply, "HTTP/1.1 200 OK\r\n%s\r\n",
                 announced ? "Content-Length: 4000\r\n" : "");
        conn_str(c, reply);
        memset(reply, 'x', sizeof reply);
        for (int i = 0; i < 4; i++)
            if (!conn_write(c, reply, 1000)) break;
    } else if (strcmp(path, "/stream") == 0) {
        /* An event stream that outlives the total timeout (300 ms) between its two events. */
        conn_str(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: one\n\n");
        usleep(600 * 1000);
        conn_str(c, "data: two\n\n");
    } else if (strcmp(path, "/malformed") == 0) {
        conn_str(c, "HTTP/1.1 abc OK\r\nContent-Length: 0\r\n\r\n");
    } else if (strcmp(path, "/truncated") == 0) {
        conn_str(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    } else if (strcmp(path, "/silent-close") == 0) {
        /* close without a byte */
    } else if (strcmp(path, "/hang") == 0) {
        /* Never answer; wait for the client to give up and close. */
        char sink[256];
        while (conn_read(c, sink, sizeof sink) > 0) {
        }
    } else {
        conn_str(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
}

static void serve_conn(server_t *s, int fd)
{
    struct timeval tv = {.tv_sec = SERVER_IDLE_S};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1; /* mbedTLS writes each handshake record alone: keep Nagle from delaying them */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn_t c = {.srv = s, .fd = fd};
    char *req = malloc(MAX_REQUEST);
    bool ok = req != NULL;
    if (s->tls) {
        mbedtls_ssl_init(&c.ssl);
        ok = ok && mbedtls_ssl_setup(&c.ssl, &s->conf) == 0;
        if (ok) mbedtls_ssl_set_bio(&c.ssl, &c.fd, fd_send, fd_recv, NULL);
        /* Fails when the client refuses our certificate. */
        ok = ok && mbedtls_ssl_handshake(&c.ssl) == 0;
    }
    size_t head_len = 0;
    if (ok && read_request(&c, req, MAX_REQUEST, &head_len) > 0) {
        atomic_fetch_add(&s->requests, 1);
        answer(&c, req, head_len);
        if (s->tls) mbedtls_ssl_close_notify(&c.ssl);
    }
    free(req);
    if (s->tls) mbedtls_ssl_free(&c.ssl);
    close(fd);
}

static void *server_main(void *arg)
{
    server_t *s = arg;
    for (;;) {
        struct pollfd pf[2] = {{.fd = s->lfd, .events = POLLIN},
                               {.fd = s->stop[0], .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pf[1].revents != 0) break;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd >= 0) serve_conn(s, fd);
    }
    return NULL;
}

/* Listens on 127.0.0.1:0; the port is in s->port. */
static int listen_loopback(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

static void server_start(server_t *s, pki_t *p, const char *cert_pem)
{
    memset(s, 0, sizeof *s);
    s->lfd = listen_loopback(&s->port);
    assert_int_equal(listen(s->lfd, 16), 0);
    assert_int_equal(pipe(s->stop), 0);
    s->tls = cert_pem != NULL;
    if (s->tls) {
        mbedtls_entropy_init(&s->entropy);
        mbedtls_ctr_drbg_init(&s->drbg);
        mbedtls_x509_crt_init(&s->crt);
        mbedtls_ssl_config_init(&s->conf);
        assert_int_equal(
            mbedtls_ctr_drbg_seed(&s->drbg, mbedtls_entropy_func, &s->entropy, NULL, 0), 0);
        assert_int_equal(
            mbedtls_x509_crt_parse(&s->crt, (const unsigned char *)cert_pem, strlen(cert_pem) + 1),
            0);
        assert_int_equal(mbedtls_ssl_config_defaults(&s->conf, MBEDTLS_SSL_IS_SERVER,
                                                     MBEDTLS_SSL_TRANSPORT_STREAM,
                                                     MBEDTLS_SSL_PRESET_DEFAULT),
                         0);
        mbedtls_ssl_conf_rng(&s->conf, mbedtls_ctr_drbg_random, &s->drbg);
        assert_int_equal(mbedtls_ssl_conf_own_cert(&s->conf, &s->crt, &p->srv_key), 0);
    }
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

static void server_stop(server_t *s)
{
    assert_int_equal(write(s->stop[1], "x", 1), 1);
    pthread_join(s->thread, NULL);
    close(s->stop[0]);
    close(s->stop[1]);
    close(s->lfd);
    if (s->tls) {
        mbedtls_ssl_config_free(&s->conf);
        mbedtls_x509_crt_free(&s->crt);
        mbedtls_ctr_drbg_free(&s->drbg);
        mbedtls_entropy_free(&s->entropy);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Fixture and helpers                                                                       */

typedef struct fixture {
    pki_t pki;
    server_t plain, tls, rogue, wrong;
} fixture_t;

static int group_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
#if MBEDTLS_VERSION_NUMBER >= 0x03000000 && defined(MBEDTLS_PSA_CRYPTO_C)
    assert_int_equal(psa_crypto_init(), PSA_SUCCESS);
#endif
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    pki_make(&f->pki);
    server_start(&f->plain, &f->pki, NULL);
    server_start(&f->tls, &f->pki, f->pki.srv_pem);
    server_start(&f->rogue, &f->pki, f->pki.rogue_srv_pem);
    server_start(&f->wrong, &f->pki, f->pki.wrong_pem);
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;
    server_stop(&f->plain);
    server_stop(&f->tls);
    server_stop(&f->rogue);
    server_stop(&f->wrong);
    pki_free(&f->pki);
    free(f);
    return 0;
}

typedef struct result {
    int calls;
    int err;
    int status;
    char *body;
    size_t body_len;
    char *content_type;
    char *msg;
} result_t;

static void result_free(result_t *r)
{
    free(r->body);
    free(r->content_type);
    free(r->msg);
}

static char *dup_or_null(const char *s, size_t n)
{
    if (s == NULL) return NULL;
    char *d = malloc(n + 1);
    assert_non_null(d);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void on_result(void *data, int err, const ptc_http_response_t *resp, const char *msg)
{
    result_t *res = data;
    res->calls++;
    res->err = err;
    if (err == PTC_HTTP_OK) {
        assert_non_null(resp);
        assert_null(msg);
        res->status = resp->status;
        res->body = dup_or_null(resp->body, resp->body_len);
        res->body_len = resp->body_len;
        assert_int_equal(resp->body[resp->body_len], '\0');
        if (resp->content_type)
            res->content_type = dup_or_null(resp->content_type, strlen(resp->content_type));
    } else {
        assert_null(resp);
        assert_non_null(msg);
        res->msg = dup_or_null(msg, strlen(msg));
    }
}

/* PTC_TEST_VERBOSE=1: the client's lines on stderr. */
static void log_line(void *data, int level, const char *line)
{
    fprintf(data, "http client (%d): %s\n", level, line);
}

static void client_opts(fixture_t *f, ptc_http_client_opts_t *o)
{
    ptc_http_client_opts_default(o);
    o->ca_file = f->pki.ca_path;
    o->connect_timeout_ms = TEST_TIMEOUT_MS;
    o->total_timeout_ms = TEST_TIMEOUT_MS;
    o->max_response_bytes = TEST_BODY_CAP;
}

/* Runs one request to completion on a fresh loop and client; checks the callback ran once and
 * that every handle was closed. */
static void run_with(fixture_t *f, const ptc_http_client_opts_t *opts, const char *method,
                     const char *url, const char *body, result_t *res)
{
    memset(res, 0, sizeof *res);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_t *c = NULL;
    ptc_http_client_opts_t o;
    if (opts == NULL) {
        client_opts(f, &o);
        opts = &o;
    }
    /* PTC_TEST_VERBOSE=1 shows the client's debug log, with every error message. */
    bool verbose = getenv("PTC_TEST_VERBOSE") != NULL;
    assert_int_equal(ptc_http_client_new(&loop, opts, verbose ? log_line : NULL, stderr, &c),
                     PTC_HTTP_OK);
    ptc_http_header_t hdr[] = {{"X-Test", "yes"}};
    assert_int_equal(ptc_http_request(c, method, url, hdr, 1, body, body ? strlen(body) : 0,
                                      on_result, res, NULL),
                     PTC_HTTP_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(res->calls, 1);
    ptc_http_client_free(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void run(fixture_t *f, const char *method, const char *url, const char *body, result_t *res)
{
    run_with(f, NULL, method, url, body, res);
}

static void url_of(char *out, size_t cap, const char *scheme, const char *host, server_t *s,
                   const char *path)
{
    snprintf(out, cap, "%s://%s:%u%s", scheme, host, (unsigned)s->port, path);
}

/* ---------------------------------------------------------------------------------------- */
/* Tests                                                                                     */

static void url_parse_accepts_hosts_ports_and_targets(void **state)
{
    (void)state;
    ptc__http_url_t u;
    assert_int_equal(
        ptc__http_url_parse("https://api.example.com/v1/embeddings?x=1#frag", &u, NULL),
        PTC_HTTP_OK);
    assert_true(u.tls);
    assert_string_equal(u.host, "api.example.com");
    assert_int_equal(u.port, 443);
    assert_true(u.default_port);
    assert_string_equal(u.target, "/v1/embeddings?x=1");
    ptc__http_url_free(&u);

    assert_int_equal(ptc__http_url_parse("HTTP://[::1]:8080?q", &u, NULL), PTC_HTTP_OK);
    assert_false(u.tls);
    assert_true(u.ipv6);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 8080);
    assert_false(u.default_port);
    assert_string_equal(u.target, "/?q");
    ptc__http_url_free(&u);

    assert_int_equal(ptc__http_url_parse("http://localhost", &u, NULL), PTC_HTTP_OK);
    assert_int_equal(u.port, 80);
    assert_string_equal(u.target, "/");
    ptc__http_url_free(&u);
}

static void url_parse_rejects_malformed_urls(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "ftp://example.com/",
        "http//example.com/",
        "http://user:pw@example.com/",
        "http://@example.com/",
        "http:///path",
        "http://example.com:/",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com:8x/",
        "http://[::1/",
        "http://[zz]/",
        "http://exa mple.com/",
        "http://example.com/a b",
        "http://example.com/\r\nX: y",
        "http://ex%41mple.com/",
        "http://[::1]x/",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ptc__http_url_t u;
        const char *why = NULL;
        int rc = ptc__http_url_parse(bad[i], &u, &why);
        if (rc != PTC_HTTP_EINVAL) print_error("accepted: '%s'\n", bad[i]);
        assert_int_equal(rc, PTC_HTTP_EINVAL);
        assert_non_null(why);
        ptc__http_url_free(&u);
    }
}

static void request_rejects_bad_arguments_without_calling_back(void **state)
{
    fixture_t *f = *state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    ptc_http_client_t *c = NULL;
    assert_int_equal(ptc_http_client_new(&loop, &o, NULL, NULL, &c), PTC_HTTP_OK);
    result_t res = {0};
    char url[128];
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/hello");
    ptc_http_header_t inject[] = {{"X-A", "b\r\nX-Injected: 1"}};
    ptc_http_header_t reserved[] = {{"Content-Length", "3"}};
    ptc_http_header_t badname[] = {{"Bad Name", "v"}};
    assert_int_equal(ptc_http_request(c, "GET", url, inject, 1, NULL, 0, on_result, &res, NULL),
                     PTC_HTTP_EINVAL);
    assert_int_equal(ptc_http_request(c, "GET", url, reserved, 1, NULL, 0, on_result, &res, NULL),
                     PTC_HTTP_EINVAL);
    assert_int_equal(ptc_http_request(c, "GET", url, badname, 1, NULL, 0, on_result, &res, NULL),
                     PTC_HTTP_EINVAL);
    assert_int_equal(ptc_http_request(c, "GE T", url, NULL, 0, NULL, 0, on_result, &res, NULL),
                     PTC_HTTP_EINVAL);
    assert_int_equal(
        ptc_http_request(c, "GET", "http://u@127.0.0.1/", NULL, 0, NULL, 0, on_result, &res, NULL),
        PTC_HTTP_EINVAL);
    assert_int_equal(
        ptc_http_request(c, "GET", "file:///etc/passwd", NULL, 0, NULL, 0, on_result, &res, NULL),
        PTC_HTTP_EINVAL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(res.calls, 0);
    ptc_http_client_free(c);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void missing_ca_file_fails_client_creation(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_opts_t o;
    ptc_http_client_opts_default(&o);
    o.ca_file = "no-such-dir/no-such-ca.pem";
    ptc_http_client_t *c = NULL;
    assert_int_equal(ptc_http_client_new(&loop, &o, NULL, NULL, &c), PTC_HTTP_EINVAL);
    assert_null(c);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void http_get_returns_status_body_and_content_type(void **state)
{
    fixture_t *f = *state;
    char url[128];
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/hello");
    result_t res;
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_OK);
    assert_int_equal(res.status, 200);
    assert_int_equal(res.body_len, 5);
    assert_string_equal(res.body, "hello");
    assert_string_equal(res.content_type, "text/plain");
    result_free(&res);
}

static void http_post_sends_host_length_and_body(void **state)
{
    fixture_t *f = *state;
    char url[128], want[256];
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/echo");
    result_t res;
    run(f, "POST", url, "{\"input\":\"abc\"}", &res);
    assert_int_equal(res.err, PTC_HTTP_OK);
    assert_int_equal(res.status, 201);
    snprintf(want, sizeof want, "POST host=127.0.0.1:%u connection=close body={\"input\":\"abc\"}",
             (unsigned)f->plain.port);
    assert_string_equal(res.body, want);
    assert_string_equal(res.content_type, "application/json; charset=utf-8");
    result_free(&res);
}

static void https_get_and_post_verify_the_test_ca(void **state)
{
    fixture_t *f = *state;
    char url[128], want[256];
    url_of(url, sizeof url, "https", "localhost", &f->tls, "/hello");
    result_t res;
    run(f, "GET", url, NULL, &res);
    if (res.err != PTC_HTTP_OK) print_error("%s\n", res.msg);
    assert_int_equal(res.err, PTC_HTTP_OK);
    assert_int_equal(res.status, 200);
    assert_string_equal(res.body, "hello");
    assert_string_equal(res.content_type, "text/plain");
    result_free(&res);

    url_of(url, sizeof url, "https", "localhost", &f->tls, "/echo");
    run(f, "POST", url, "[1,2,3]", &res);
    assert_int_equal(res.err, PTC_HTTP_OK);
    assert_int_equal(res.status, 201);
    snprintf(want, sizeof want, "POST host=localhost:%u connection=close body=[1,2,3]",
             (unsigned)f->tls.port);
    assert_string_equal(res.body, want);
    result_free(&res);
}

static void chunked_and_close_delimited_bodies_are_reassembled(void **state)
{
    fixture_t *f = *state;
    char url[128];
    result_t res;
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/chunked");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_OK);
    assert_string_equal(res.body, "hello world");
    result_free(&res);

    url_of(url, sizeof url, "https", "localhost", &f->tls, "/chunked");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_OK);
    assert_string_equal(res.body, "hello world");
    result_free(&res);

    url_of(url, sizeof url, "https", "localhost", &f->tls, "/until-close");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_OK);
    assert_string_equal(res.body, "read until the end");
    result_free(&res);

    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/until-close");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_OK);
    assert_string_equal(res.body, "read until the end");
    result_free(&res);
}

static void unknown_ca_fails_with_etls(void **state)
{
    fixture_t *f = *state;
    char url[128];
    url_of(url, sizeof url, "https", "localhost", &f->rogue, "/hello");
    result_t res;
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_ETLS);
    assert_non_null(strstr(res.msg, "not correctly signed by the trusted CA"));
    result_free(&res);
}

static void certificate_for_another_host_fails_with_etls(void **state)
{
    fixture_t *f = *state;
    char url[128];
    url_of(url, sizeof url, "https", "localhost", &f->wrong, "/hello");
    result_t res;
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_ETLS);
    assert_non_null(strstr(res.msg, "Common Name"));
    result_free(&res);
}

static void system_bundle_does_not_trust_the_test_ca(void **state)
{
    fixture_t *f = *state;
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    o.ca_file = NULL;
    char url[128];
    url_of(url, sizeof url, "https", "localhost", &f->tls, "/hello");
    result_t res;
    run_with(f, &o, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_ETLS);
    result_free(&res);
}

static void redirect_is_refused_and_names_the_target(void **state)
{
    fixture_t *f = *state;
    char url[128];
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/redirect");
    result_t res;
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_EREDIRECT);
    assert_non_null(strstr(res.msg, "http://elsewhere.invalid/next"));
    assert_non_null(strstr(res.msg, "302"));
    result_free(&res);
}

static void body_over_the_cap_fails_with_etoobig(void **state)
{
    fixture_t *f = *state;
    char url[128];
    result_t res;
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/big");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_ETOOBIG);
    result_free(&res);

    url_of(url, sizeof url, "https", "localhost", &f->tls, "/big-until-close");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_ETOOBIG);
    result_free(&res);
}

/* A streamed request's two callbacks share data: the result first, then what the chunks told. */
typedef struct streamed {
    result_t res;
    int chunks;
    char got[256];
    size_t got_len;
    int stop_at; /* the chunk whose callback returns -1, 0 for none */
    char content_type[64];
} streamed_t;

static int on_chunk(void *data, int status, const char *content_type, const char *p, size_t n)
{
    streamed_t *st = data;
    assert_int_equal(st->res.calls, 0); /* every chunk comes before the end */
    assert_int_equal(status, 200);
    snprintf(st->content_type, sizeof st->content_type, "%s", content_type ? content_type : "");
    st->chunks++;
    assert_true(st->got_len + n < sizeof st->got);
    memcpy(st->got + st->got_len, p, n);
    st->got_len += n;
    st->got[st->got_len] = '\0';
    return st->chunks == st->stop_at ? -1 : 0;
}

static void run_stream(fixture_t *f, const char *url, streamed_t *st)
{
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    o.total_timeout_ms = TEST_SHORT_TIMEOUT_MS; /* shorter than the stream: it must not apply */
    o.max_response_bytes = 8;                   /* smaller than the stream: nor must this */
    ptc_http_client_t *c = NULL;
    assert_int_equal(ptc_http_client_new(&loop, &o, NULL, NULL, &c), PTC_HTTP_OK);
    assert_int_equal(
        ptc_http_request_stream(c, "POST", url, NULL, 0, "{}", 2, on_chunk, on_result, st, NULL),
        PTC_HTTP_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(st->res.calls, 1);
    ptc_http_client_free(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void a_streamed_body_comes_as_it_arrives_without_the_total_timeout_or_cap(void **state)
{
    fixture_t *f = *state;
    char url[128];
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/stream");
    streamed_t st = {0};
    run_stream(f, url, &st);
    assert_int_equal(st.res.err, PTC_HTTP_OK);
    assert_string_equal(st.got, "data: one\n\ndata: two\n\n");
    assert_true(st.chunks >= 2); /* the events were 600 ms apart: never one read */
    assert_string_equal(st.content_type, "text/event-stream");
    assert_int_equal(st.res.body_len, 0);
    result_free(&st.res);

    /* The reader may end the stream: the request ends cancelled, after that chunk. */
    url_of(url, sizeof url, "https", "localhost", &f->tls, "/stream");
    streamed_t stop = {.stop_at = 1};
    run_stream(f, url, &stop);
    assert_int_equal(stop.res.err, PTC_HTTP_ECANCELED);
    assert_int_equal(stop.chunks, 1);
    assert_string_equal(stop.got, "data: one\n\n");
    result_free(&stop.res);
}

static void silent_server_times_out(void **state)
{
    fixture_t *f = *state;
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    o.total_timeout_ms = TEST_SHORT_TIMEOUT_MS;
    char url[128];
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/hang");
    result_t res;
    run_with(f, &o, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_ETIMEDOUT);
    assert_non_null(strstr(res.msg, "300 ms"));
    result_free(&res);
}

/* The plain server takes the ClientHello for the start of a request and waits for more, so the
 * TLS handshake never completes: the connect deadline (which covers it) fires. */
static void stalled_tls_handshake_hits_the_connect_timeout(void **state)
{
    fixture_t *f = *state;
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    o.connect_timeout_ms = TEST_SHORT_TIMEOUT_MS;
    char url[128];
    url_of(url, sizeof url, "https", "localhost", &f->plain, "/hello");
    result_t res;
    run_with(f, &o, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_ETIMEDOUT);
    assert_non_null(strstr(res.msg, "connecting to"));
    result_free(&res);
}

static void refused_port_fails_with_econnect(void **state)
{
    fixture_t *f = *state;
    uint16_t port;
    int fd = listen_loopback(&port); /* bound, not listening: connects are refused */
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", (unsigned)port);
    result_t res;
    run(f, "GET", url, NULL, &res);
    close(fd);
    assert_int_equal(res.err, PTC_HTTP_ECONNECT);
    assert_non_null(strstr(res.msg, "refused"));
    result_free(&res);
}

static void malformed_or_short_responses_fail(void **state)
{
    fixture_t *f = *state;
    char url[128];
    result_t res;
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/malformed");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_EPROTO);
    result_free(&res);

    url_of(url, sizeof url, "https", "localhost", &f->tls, "/truncated");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_EPROTO);
    result_free(&res);

    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/silent-close");
    run(f, "GET", url, NULL, &res);
    assert_int_equal(res.err, PTC_HTTP_ECLOSED);
    result_free(&res);
}

/* Cancels (or frees the client) once the server has read the request. */
typedef struct interrupt {
    server_t *srv;
    int seen;
    ptc_http_client_t *client;
    ptc_http_req_t *req;
    result_t *res;
    bool free_client;
    int calls_when_returned;
} interrupt_t;

static void on_poll(uv_timer_t *t)
{
    interrupt_t *in = t->data;
    if (atomic_load(&in->srv->requests) == in->seen) return;
    if (in->free_client) {
        ptc_http_client_free(in->client);
        in->client = NULL;
    } else {
        ptc_http_cancel(in->req);
    }
    in->calls_when_returned = in->res->calls;
    uv_close((uv_handle_t *)t, NULL);
}

static void interrupt_mid_request(fixture_t *f, server_t *srv, const char *scheme, const char *host,
                                  bool free_client)
{
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    interrupt_t in = {.srv = srv, .seen = atomic_load(&srv->requests), .free_client = free_client};
    result_t res = {0};
    in.res = &res;
    assert_int_equal(ptc_http_client_new(&loop, &o, NULL, NULL, &in.client), PTC_HTTP_OK);
    char url[128];
    url_of(url, sizeof url, scheme, host, srv, "/hang");
    assert_int_equal(
        ptc_http_request(in.client, "GET", url, NULL, 0, NULL, 0, on_result, &res, &in.req),
        PTC_HTTP_OK);
    assert_non_null(in.req);
    uv_timer_t poll_timer;
    uv_timer_init(&loop, &poll_timer);
    poll_timer.data = &in;
    uv_timer_start(&poll_timer, on_poll, 1, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(in.calls_when_returned, 1); /* the callback ran before cancel returned */
    assert_int_equal(res.calls, 1);
    assert_int_equal(res.err, PTC_HTTP_ECANCELED);
    ptc_http_client_free(in.client);
    assert_int_equal(uv_loop_close(&loop), 0);
    result_free(&res);
}

static void cancel_mid_request_calls_back_once(void **state)
{
    fixture_t *f = *state;
    interrupt_mid_request(f, &f->plain, "http", "127.0.0.1", false);
    interrupt_mid_request(f, &f->tls, "https", "localhost", false);
}

static void freeing_the_client_cancels_requests_in_flight(void **state)
{
    fixture_t *f = *state;
    interrupt_mid_request(f, &f->plain, "http", "127.0.0.1", true);
    interrupt_mid_request(f, &f->tls, "https", "localhost", true);
}

static void freeing_the_client_during_the_lookup_cancels(void **state)
{
    fixture_t *f = *state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    ptc_http_client_t *c = NULL;
    assert_int_equal(ptc_http_client_new(&loop, &o, NULL, NULL, &c), PTC_HTTP_OK);
    char url[128];
    url_of(url, sizeof url, "http", "localhost", &f->plain, "/hello");
    result_t a = {0}, b = {0};
    assert_int_equal(ptc_http_request(c, "GET", url, NULL, 0, NULL, 0, on_result, &a, NULL),
                     PTC_HTTP_OK);
    assert_int_equal(ptc_http_request(c, "GET", url, NULL, 0, NULL, 0, on_result, &b, NULL),
                     PTC_HTTP_OK);
    ptc_http_client_free(c);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    assert_int_equal(a.err, PTC_HTTP_ECANCELED);
    assert_int_equal(b.err, PTC_HTTP_ECANCELED);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(a.calls, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
    result_free(&a);
    result_free(&b);
}

/* The first answer frees the client from inside its callback; the other request is cancelled. */
typedef struct free_in_cb {
    ptc_http_client_t *client;
    result_t first, second;
} free_in_cb_t;

static void on_first(void *data, int err, const ptc_http_response_t *resp, const char *msg)
{
    free_in_cb_t *x = data;
    on_result(&x->first, err, resp, msg);
    ptc_http_client_free(x->client);
    x->client = NULL;
}

static void on_second(void *data, int err, const ptc_http_response_t *resp, const char *msg)
{
    free_in_cb_t *x = data;
    on_result(&x->second, err, resp, msg);
}

static void callback_may_free_the_client(void **state)
{
    fixture_t *f = *state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    free_in_cb_t x = {0};
    assert_int_equal(ptc_http_client_new(&loop, &o, NULL, NULL, &x.client), PTC_HTTP_OK);
    char hang[128], hello[128];
    url_of(hang, sizeof hang, "https", "localhost", &f->tls, "/hang");
    url_of(hello, sizeof hello, "http", "127.0.0.1", &f->plain, "/hello");
    assert_int_equal(ptc_http_request(x.client, "GET", hang, NULL, 0, NULL, 0, on_second, &x, NULL),
                     PTC_HTTP_OK);
    assert_int_equal(ptc_http_request(x.client, "GET", hello, NULL, 0, NULL, 0, on_first, &x, NULL),
                     PTC_HTTP_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_null(x.client);
    assert_int_equal(x.first.calls, 1);
    assert_int_equal(x.first.err, PTC_HTTP_OK);
    assert_string_equal(x.first.body, "hello");
    assert_int_equal(x.second.calls, 1);
    assert_int_equal(x.second.err, PTC_HTTP_ECANCELED);
    assert_int_equal(uv_loop_close(&loop), 0);
    result_free(&x.first);
    result_free(&x.second);
}

static void concurrent_requests_all_complete(void **state)
{
    fixture_t *f = *state;
    enum { N = 8 };
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    ptc_http_client_t *c = NULL;
    assert_int_equal(ptc_http_client_new(&loop, &o, NULL, NULL, &c), PTC_HTTP_OK);
    result_t res[N];
    memset(res, 0, sizeof res);
    for (int i = 0; i < N; i++) {
        char url[128];
        if (i % 2)
            url_of(url, sizeof url, "https", "localhost", &f->tls, "/chunked");
        else
            url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/chunked");
        assert_int_equal(
            ptc_http_request(c, "GET", url, NULL, 0, NULL, 0, on_result, &res[i], NULL),
            PTC_HTTP_OK);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].err, PTC_HTTP_OK);
        assert_string_equal(res[i].body, "hello world");
        result_free(&res[i]);
    }
    ptc_http_client_free(c);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void too_many_requests_in_flight_are_refused(void **state)
{
    fixture_t *f = *state;
    enum { LIMIT = 256 };
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ptc_http_client_opts_t o;
    client_opts(f, &o);
    ptc_http_client_t *c = NULL;
    assert_int_equal(ptc_http_client_new(&loop, &o, NULL, NULL, &c), PTC_HTTP_OK);
    char url[128];
    url_of(url, sizeof url, "http", "127.0.0.1", &f->plain, "/hello");
    result_t *res = calloc(LIMIT + 1, sizeof *res);
    assert_non_null(res);
    for (int i = 0; i < LIMIT; i++)
        assert_int_equal(
            ptc_http_request(c, "GET", url, NULL, 0, NULL, 0, on_result, &res[i], NULL),
            PTC_HTTP_OK);
    assert_int_equal(
        ptc_http_request(c, "GET", url, NULL, 0, NULL, 0, on_result, &res[LIMIT], NULL),
        PTC_HTTP_EBUSY);
    ptc_http_client_free(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < LIMIT; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].err, PTC_HTTP_ECANCELED);
        result_free(&res[i]);
    }
    assert_int_equal(res[LIMIT].calls, 0);
    free(res);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(url_parse_accepts_hosts_ports_and_targets),
        cmocka_unit_test(url_parse_rejects_malformed_urls),
        cmocka_unit_test(request_rejects_bad_arguments_without_calling_back),
        cmocka_unit_test(missing_ca_file_fails_client_creation),
        cmocka_unit_test(http_get_returns_status_body_and_content_type),
        cmocka_unit_test(http_post_sends_host_length_and_body),
        cmocka_unit_test(https_get_and_post_verify_the_test_ca),
        cmocka_unit_test(chunked_and_close_delimited_bodies_are_reassembled),
        cmocka_unit_test(unknown_ca_fails_with_etls),
        cmocka_unit_test(certificate_for_another_host_fails_with_etls),
        cmocka_unit_test(system_bundle_does_not_trust_the_test_ca),
        cmocka_unit_test(redirect_is_refused_and_names_the_target),
        cmocka_unit_test(body_over_the_cap_fails_with_etoobig),
        cmocka_unit_test(a_streamed_body_comes_as_it_arrives_without_the_total_timeout_or_cap),
        cmocka_unit_test(silent_server_times_out),
        cmocka_unit_test(stalled_tls_handshake_hits_the_connect_timeout),
        cmocka_unit_test(refused_port_fails_with_econnect),
        cmocka_unit_test(malformed_or_short_responses_fail),
        cmocka_unit_test(cancel_mid_request_calls_back_once),
        cmocka_unit_test(freeing_the_client_cancels_requests_in_flight),
        cmocka_unit_test(freeing_the_client_during_the_lookup_cancels),
        cmocka_unit_test(callback_may_free_the_client),
        cmocka_unit_test(concurrent_requests_all_complete),
        cmocka_unit_test(too_many_requests_in_flight_are_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
