/* identity.c - who a client is (mcp_identity_t): the digest of its MCP session and of the
 * credential it authenticated with, so that the server can bind what it makes for one client
 * (output cursors, file URIs, workspace handles) to it; and the hook told when a stateful
 * session has ended, so that what was bound to it can go at once. */
#include "internal.h"

#include <mbedtls/sha256.h>
#include <string.h>

/* Names what is hashed, so that no other digest of this program can equal an identity. */
static const char IDENTITY_DOMAIN[] = "ptc-mcp identity v1";

bool mcp_identity_equal(const mcp_identity_t *a, const mcp_identity_t *b)
{
    return memcmp(a->b, b->b, sizeof a->b) == 0;
}

void mcp__credential_digest(const char *secret, size_t len, unsigned char out[MCP__CRED_BYTES])
{
    /* SHA-256 of 2.x cannot fail on memory it owns; a zero digest would still only match
     * itself, never leak. */
    if (mbedtls_sha256_ret((const unsigned char *)secret, len, out, 0) != 0)
        memset(out, 0, MCP__CRED_BYTES);
}

void mcp__session_set_credential(mcp_session_t *s, const unsigned char digest[MCP__CRED_BYTES])
{
    memcpy(s->cred, digest, MCP__CRED_BYTES);
    s->has_cred = true;
}

/* The digest of: the domain, whether there is a session and its serial, whether there is a
 * credential and its digest. Fixed-size fields, so that no two inputs run together. */
static void make(uint64_t serial, bool has_session, const mcp_session_t *cred_of,
                 mcp_identity_t *out)
{
    unsigned char in[sizeof IDENTITY_DOMAIN + 1 + 8 + 1 + MCP__CRED_BYTES];
    size_t k = 0;
    memcpy(in, IDENTITY_DOMAIN, sizeof IDENTITY_DOMAIN);
    k += sizeof IDENTITY_DOMAIN;
    in[k++] = has_session ? 1 : 0;
    for (int i = 0; i < 8; i++)
        in[k++] = has_session ? (unsigned char)(serial >> (8 * i)) : 0;
    bool has_cred = cred_of != NULL && cred_of->has_cred;
    in[k++] = has_cred ? 1 : 0;
    if (has_cred)
        memcpy(in + k, cred_of->cred, MCP__CRED_BYTES);
    else
        memset(in + k, 0, MCP__CRED_BYTES);
    k += MCP__CRED_BYTES;
    if (mbedtls_sha256_ret(in, k, out->b, 0) != 0) {
        /* Cannot happen with 2.x's software SHA-256; if it did, an identity nobody else
         * can have is the safe answer: all ones never is a digest anyone computed here. */
        memset(out->b, 0xFF, sizeof out->b);
    }
}

void mcp_session_identity(const mcp_session_t *s, mcp_identity_t *out)
{
    make(s->serial, true, s, out);
}

void mcp__request_identity(const mcp_session_t *s, mcp_identity_t *out)
{
    /* A stateless request (2026-07-28) lives in a session of its own that ends with its
     * answer: only its credential says who it is. */
    if (s->stateless || mcp__session_modern(s))
        make(0, false, s, out);
    else
        make(s->serial, true, s, out);
}

void mcp_call_identity(const mcp_call_t *call, mcp_identity_t *out)
{
    *out = call->who;
}

void mcp_server_on_session_end(mcp_server_t *srv, mcp_session_end_fn fn, void *data)
{
    srv->end_fn = fn;
    srv->end_data = data;
}

void mcp__session_tell_end(mcp_session_t *s)
{
    if (s->end_told) return;
    s->end_told = true;
    mcp_server_t *srv = s->srv;
    if (s->stateless || srv->end_fn == NULL) return;
    mcp_identity_t who;
    mcp_session_identity(s, &who);
    srv->end_fn(&who, srv->end_data);
}
