/* tools.h - the tools the binary registers on the MCP server, wired onto the libraries. */
#ifndef PTC_SERVER_TOOLS_H
#define PTC_SERVER_TOOLS_H

#include "mcp.h"
#include "options.h"
#include "registry.h"

/**
 * The registry's remote embedding provider (embed_remote.c): OpenAI-compatible /v1/embeddings or
 * Ollama /api/embed (chosen by the URL's path), with the key from spec->key_env, batches of 64,
 * retries with backoff, L2-normalised vectors. data is the --ca-file path (borrowed, may be NULL).
 * Probes the endpoint once (blocking) to learn the dimension. Fits reg_embedder_spec_t's
 * open_remote.
 */
int ptc_remote_embedder_open(const reg_embedder_spec_t *spec, void *data, reg_embedder_t **out,
                             char *msg, size_t msg_size);

#endif
