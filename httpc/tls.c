/* tls.c - TLS for the outbound HTTP client: mbedTLS over memory BIOs (libuv keeps
 * the socket), the handshake with SNI and the certificate check, and the CA bundle. */
#include "internal.h"

#include <mbedtls/error.h>

#include <string.h>
#include <unistd.h>

/* Plaintext bytes taken out of mbedTLS per mbedtls_ssl_read(). */
#define PTC_HTTP_PLAIN_CHUNK (16 * 1024)

/* ---------------------------------------------------------------------------------------- */
/* TLS                                                                                       */

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    ptc_http_req_t *r = ctx;
    return ptc_buf_append(&r->out, buf, len) < 0 ? MBEDTLS_ERR_SSL_ALLOC_FAILED : (int)len;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    ptc_http_req_t *r = ctx;
    if (r->tls_in_len == 0) return r->eof ? 0 : MBEDTLS_ERR_SSL_WANT_READ;
    size_t n = len < r->tls_in_len ? len : r->tls_in_len;
    memcpy(buf, r->tls_in, n);
    r->tls_in += n;
    r->tls_in_len -= n;
    return (int)n;
}

static bool tls_retry(int ret)
{
    if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE) return true;
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
    if (ret == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) return true;
#endif
    return false;
}

static void tls_fail(ptc_http_req_t *r, int ret)
{
    char err[200];
    mbedtls_strerror(ret, err, sizeof err);
    uint32_t flags = r->ssl_inited ? mbedtls_ssl_get_verify_result(&r->ssl) : 0;
    if (ret == MBEDTLS_ERR_SSL_CONN_EOF || (r->eof && (ret == 0 || tls_retry(ret)))) {
        ptc__http_req_fail(r, PTC_HTTP_ETLS, "%s closed the connection during the TLS handshake",
                           r->where);
    } else if (flags != 0 && flags != (uint32_t)-1) {
        char info[400];
        int n = mbedtls_x509_crt_verify_info(info, sizeof info, "", flags);
        if (n < 0) n = 0;
        /* verify_info writes one line per reason; join them. */
        for (int i = 0; i < n && info[i]; i++)
            if (info[i] == '\n') info[i] = (i + 1 < n && info[i + 1]) ? ';' : '\0';
        ptc__http_req_fail(
            r, PTC_HTTP_ETLS,
            "TLS handshake with %s failed: %s (certificate rejected: %s); check the host name, "
            "or pass --ca-file if the server uses a private CA",
            r->where, err, info);
    } else {
        ptc__http_req_fail(r, PTC_HTTP_ETLS, "TLS handshake with %s failed: %s (-0x%04x)", r->where,
                           err, (unsigned)-ret);
    }
}

/* Writes the whole request through TLS (the memory BIO never blocks), then drops it. */
static int tls_write_request(ptc_http_req_t *r)
{
    size_t off = 0;
    while (off < r->request.len) {
        int n = mbedtls_ssl_write(&r->ssl, (const unsigned char *)r->request.p + off,
                                  r->request.len - off);
        if (n < 0) return n;
        off += (size_t)n;
    }
    ptc_buf_free(&r->request);
    return 0;
}

/* Runs the TLS state machine over the ciphertext in tls_in (all of it is consumed). */
void ptc__http_req_tls_pump(ptc_http_req_t *r)
{
    if (!r->handshake_done) {
        int ret = mbedtls_ssl_handshake(&r->ssl);
        if (!ptc__http_req_flush_out(r)) return;
        if (ret != 0 && tls_retry(ret) && !r->eof) return;
        if (ret != 0) {
            tls_fail(r, ret);
            return;
        }
        r->handshake_done = true;
        uv_timer_stop(&r->connect_timer);
        ret = tls_write_request(r);
        if (ret != 0) {
            tls_fail(r, ret);
            return;
        }
        if (!ptc__http_req_flush_out(r)) return;
    }
    for (;;) {
        unsigned char plain[PTC_HTTP_PLAIN_CHUNK];
        int n = mbedtls_ssl_read(&r->ssl, plain, sizeof plain);
        if (n > 0) {
            ptc__http_req_feed(r, (const char *)plain, (size_t)n);
            if (r->done) return;
            continue;
        }
        if (n == 0 || n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || n == MBEDTLS_ERR_SSL_CONN_EOF) {
            ptc__http_req_on_eof(r);
            return;
        }
        if (tls_retry(n)) {
            if (r->tls_in_len > 0) continue;
            break;
        }
        char err[200];
        mbedtls_strerror(n, err, sizeof err);
        ptc__http_req_fail(r, PTC_HTTP_ETLS, "TLS error reading from %s: %s (-0x%04x)", r->where,
                           err, (unsigned)-n);
        return;
    }
    /* Reading may have produced records to send (alerts, key updates). */
    ptc__http_req_flush_out(r);
}

void ptc__http_req_start_tls(ptc_http_req_t *r)
{
    ptc_http_client_t *c = r->client;
    if (!c->have_ca) {
        ptc__http_req_fail(
            r, PTC_HTTP_ETLS,
            "cannot verify %s: no CA bundle was found on this system; pass --ca-file", r->where);
        return;
    }
    mbedtls_ssl_init(&r->ssl);
    r->ssl_inited = true;
    int ret = mbedtls_ssl_setup(&r->ssl, &c->conf);
    if (ret == 0) ret = mbedtls_ssl_set_hostname(&r->ssl, r->url.host); /* SNI + name check */
    if (ret != 0) {
        tls_fail(r, ret);
        return;
    }
    mbedtls_ssl_set_bio(&r->ssl, r, bio_send, bio_recv, NULL);
    r->tls_in_len = 0;
    ptc__http_req_tls_pump(r); /* sends the ClientHello */
}

/* Where distributions keep the system CA bundle; the first readable one is used. */
static const char *const system_ca_files[] = {
    "/etc/ssl/certs/ca-certificates.crt",                /* Debian, Ubuntu, Arch, Gentoo */
    "/etc/pki/tls/certs/ca-bundle.crt",                  /* Fedora, RHEL, CentOS */
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* RHEL 7+ */
    "/etc/ssl/ca-bundle.pem",                            /* openSUSE */
    "/etc/ssl/cert.pem",                                 /* Alpine, macOS, OpenBSD */
    "/usr/local/share/certs/ca-root-nss.crt",            /* FreeBSD */
};

int ptc__http_client_load_ca(ptc_http_client_t *c, const char *ca_file)
{
    const char *path = ca_file;
    if (path == NULL) {
        for (size_t i = 0; i < sizeof system_ca_files / sizeof system_ca_files[0]; i++) {
            if (access(system_ca_files[i], R_OK) == 0) {
                path = system_ca_files[i];
                break;
            }
        }
        if (path == NULL) {
            ptc__http_log(c, PTC_HTTP_LOG_WARNING,
                          "no system CA bundle found; https requests will fail until --ca-file is "
                          "given");
            return PTC_HTTP_OK;
        }
    }
    /* A positive result counts certificates that did not parse; the others are usable. */
    int ret = mbedtls_x509_crt_parse_file(&c->ca, path);
    /* For PEM input a negative result means not one certificate parsed. */
    if (ret < 0) {
        char err[200];
        mbedtls_strerror(ret, err, sizeof err);
        ptc__http_log(c, PTC_HTTP_LOG_ERROR, "cannot load the CA bundle %s: %s; give a PEM file",
                      path, err);
        return ca_file != NULL ? PTC_HTTP_EINVAL : PTC_HTTP_OK;
    }
    if (ret > 0)
        ptc__http_log(c, PTC_HTTP_LOG_DEBUG, "CA bundle %s: %d certificates skipped (unparsable)",
                      path, ret);
    c->have_ca = true;
    return PTC_HTTP_OK;
}
