/* transport_stdio.c - one MCP session over stdin/stdout: newline-delimited JSON, stdin as a
 * pipe, socket, TTY or regular file, and an orderly stop on EOF, SIGINT or SIGTERM. */
#include "internal.h"

#include "base.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STDIO_READ_CHUNK 65536
/* An output buffer that grew past this (one large answer, a burst) is freed once written
 * rather than kept for reuse, so that one burst does not hold its peak for the whole run. */
#define STDIO_KEEP_BUFFER    (1u << 20)
#define STDIO_INITIAL_BUFFER 16384

typedef union stdio_stream {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_pipe_t pipe;
    uv_tty_t tty;
    uv_tcp_t tcp;
} stdio_stream_t;

struct mcp_stdio {
    mcp_server_t *srv;
    mcp_session_t *session;
    mcp_transport_ops_t ops;
    mcp_framer_t framer;
    size_t max_message;

    int in_fd, out_fd;
    bool in_is_file, out_is_file;
    stdio_stream_t in, out;
    bool in_open, out_open;
    bool reading, read_paused;
    uv_fs_t read_req;
    bool read_busy;
    char *read_buf;

    /* Output is coalesced: messages sent during a loop turn are appended to `pending`, and
     * one write takes them all, from the prepare handle just before the loop would block (or
     * as soon as the write before it is done). While a write is in flight, `flight` holds its
     * bytes and new messages gather in pending; the two swap and keep their memory. One write
     * per turn instead of one per message is most of what a pipelining client costs us. */
    ptc_buf_t pending, flight;
    size_t flight_off; /* how much of flight a file write has taken (short writes) */
    bool flight_busy;
    uv_write_t write_req;
    uv_fs_t fs_write_req;
    uv_prepare_t flush;
    bool flush_on;
    size_t queued_bytes; /* pending.len + what of flight is not written yet */

    uv_signal_t sig_int, sig_term;
    uv_timer_t defer;
    int open_handles;

    bool stopping, session_idle, write_failed, done, freed;
    mcp_stdio_done_cb done_cb;
    void *done_data;
};

static void maybe_done(mcp_stdio_t *io);
static void start_reading(mcp_stdio_t *io);

/* --- output -------------------------------------------------------------------------------- */

static void on_write_error(mcp_stdio_t *io, int status)
{
    if (!io->write_failed)
        mcp_log(io->srv->lg, MCP_LOG_ERROR, "stdout write failed: %s; stopping",
                uv_strerror(status));
    io->write_failed = true;
    mcp_stdio_stop(io);
}

static void after_output(mcp_stdio_t *io, size_t len)
{
    io->queued_bytes -= len;
    if (io->read_paused && io->queued_bytes < PTC_CAP_STDIO_QUEUED_OUTPUT / 2) {
        io->read_paused = false;
        start_reading(io);
    }
    maybe_done(io);
}

static void flush_output(mcp_stdio_t *io);

/* The write in flight is done (all of it, or it failed): its buffer is free for reuse. */
static void flight_done(mcp_stdio_t *io, int status)
{
    size_t len = ptc_buf_len(&io->flight) - io->flight_off;
    io->flight_busy = false;
    io->flight_off = 0;
    ptc_buf_truncate(&io->flight, 0);
    if (io->flight.cap > STDIO_KEEP_BUFFER) ptc_buf_free(&io->flight);
    if (status < 0) on_write_error(io, status);
    after_output(io, len);
    flush_output(io);
}

static void file_write_flight(mcp_stdio_t *io);

static void on_file_written(uv_fs_t *req)
{
    mcp_stdio_t *io = req->data;
    ssize_t r = req->result;
    uv_fs_req_cleanup(req);
    if (r >= 0 && io->flight_off + (size_t)r < ptc_buf_len(&io->flight) && !io->write_failed) {
        /* Short write: the rest goes next. */
        io->flight_off += (size_t)r;
        io->queued_bytes -= (size_t)r;
        file_write_flight(io);
        return;
    }
    flight_done(io, r < 0 ? (int)r : 0);
}

static void file_write_flight(mcp_stdio_t *io)
{
    uv_buf_t buf = uv_buf_init(io->flight.p + io->flight_off,
                               (unsigned)(ptc_buf_len(&io->flight) - io->flight_off));
    io->fs_write_req.data = io;
    int rc =
        uv_fs_write(io->srv->loop, &io->fs_write_req, io->out_fd, &buf, 1, -1, on_file_written);
    if (rc < 0) flight_done(io, rc);
}

static void on_stream_written(uv_write_t *req, int status)
{
    flight_done(req->data, status);
}

/* Hands everything pending to one write, unless one is in flight (its end calls this again). */
static void flush_output(mcp_stdio_t *io)
{
    if (io->flight_busy || ptc_buf_len(&io->pending) == 0) return;
    ptc_buf_t t = io->flight; /* empty, maybe with memory to reuse */
    io->flight = io->pending;
    io->pending = t;
    io->flight_busy = true;
    if (io->write_failed) {
        flight_done(io, 0); /* dropped unwritten: nobody can read it any more */
        return;
    }
    if (io->out_is_file) {
        file_write_flight(io);
        return;
    }
    uv_buf_t buf = uv_buf_init(io->flight.p, (unsigned)ptc_buf_len(&io->flight));
    io->write_req.data = io;
    int rc = uv_write(&io->write_req, &io->out.stream, &buf, 1, on_stream_written);
    if (rc < 0) flight_done(io, rc);
}

static void on_flush(uv_prepare_t *h)
{
    mcp_stdio_t *io = h->data;
    uv_prepare_stop(h);
    io->flush_on = false;
    flush_output(io);
}

/* A message that could not be appended to pending (rc: MCP_ENOMEM, or MCP_ETOOBIG past its
 * cap) is dropped, and said in the log: the session cannot tell the client. */
static int not_queued(mcp_stdio_t *io, size_t mark, int rc)
{
    ptc_buf_truncate(&io->pending, mark);
    mcp_log(io->srv->lg, MCP_LOG_ERROR,
            "stdout: a message was dropped (%s; %zu bytes wait for the client to read them)",
            rc == MCP_ETOOBIG ? "past the output buffer's cap" : mcp_strerror(rc),
            io->queued_bytes);
    return rc;
}

/* Counts what was just appended to pending and makes sure a flush comes. */
static int queued(mcp_stdio_t *io, size_t mark)
{
    int rc = ptc_buf_append(&io->pending, "\n", 1);
    if (rc < 0) return not_queued(io, mark, rc);
    io->queued_bytes += ptc_buf_len(&io->pending) - mark;
    if (!io->flush_on && !io->flight_busy) {
        uv_prepare_start(&io->flush, on_flush);
        io->flush_on = true;
    }
    if (io->queued_bytes > PTC_CAP_STDIO_QUEUED_OUTPUT && io->reading && !io->in_is_file) {
        uv_read_stop(&io->in.stream);
        io->reading = false;
        io->read_paused = true;
    } else if (io->queued_bytes > PTC_CAP_STDIO_QUEUED_OUTPUT) {
        io->read_paused = true;
    }
    return MCP_OK;
}

static int stdio_send(void *tdata, const char *json, size_t len)
{
    mcp_stdio_t *io = tdata;
    if (io->write_failed || !io->out_open) return MCP_ECLOSED;
    size_t mark = ptc_buf_len(&io->pending);
    int rc = ptc_buf_append(&io->pending, json, len);
    return rc < 0 ? not_queued(io, mark, rc) : queued(io, mark);
}

/* An answer (a response to a request of the client's) too large for the output buffer: the
 * client still gets an answer to its id, an error that says why, if that fits. */
static void answer_too_big(mcp_stdio_t *io, const cJSON *msg)
{
    const cJSON *id = cJSON_IsObject(msg) ? cJSON_GetObjectItemCaseSensitive(msg, "id") : NULL;
    if (id == NULL || cJSON_HasObjectItem(msg, "method")) return;
    char text[160];
    snprintf(text, sizeof text,
             "the response was dropped: it would pass the stdio output buffer's cap of %u MiB",
             (unsigned)(PTC_CAP_STDIO_OUTPUT_BUFFER >> 20));
    cJSON *err = mcp_jsonrpc_error(id, MCP_JSONRPC_INTERNAL_ERROR, text, NULL);
    size_t mark = ptc_buf_len(&io->pending);
    if (err != NULL && mcp_jsonrpc_print(err, &io->pending) == MCP_OK) queued(io, mark);
    cJSON_Delete(err);
}

static int stdio_send_json(void *tdata, const cJSON *msg)
{
    mcp_stdio_t *io = tdata;
    if (io->write_failed || !io->out_open) return MCP_ECLOSED;
    size_t mark = ptc_buf_len(&io->pending);
    int rc = mcp_jsonrpc_print(msg, &io->pending);
    if (rc == MCP_OK) return queued(io, mark);
    if (rc == MCP_ENOMEM || rc == MCP_ETOOBIG) not_queued(io, mark, rc);
    if (rc == MCP_ETOOBIG) answer_too_big(io, msg);
    return rc;
}

/* --- input --------------------------------------------------------------------------------- */

static void on_line(void *data, const char *line, size_t len, bool too_big)
{
    mcp_stdio_t *io = data;
    if (too_big) {
        mcp_session_reject_oversized(io->session, len, io->max_message);
        return;
    }
    /* Blank lines between messages are tolerated. */
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i == len) return;
    mcp_session_receive(io->session, line, len);
}

static void on_eof(mcp_stdio_t *io)
{
    mcp_framer_finish(&io->framer);
    mcp_log(io->srv->lg, MCP_LOG_INFO, "stdin closed; finishing work in flight");
    mcp_stdio_stop(io);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    mcp_stdio_t *io = h->data;
    (void)suggested;
    buf->base = io->read_buf;
    buf->len = STDIO_READ_CHUNK;
}

static void on_stream_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    mcp_stdio_t *io = s->data;
    if (n > 0) {
        if (mcp_framer_feed(&io->framer, buf->base, (size_t)n) < 0)
            mcp_log(io->srv->lg, MCP_LOG_ERROR,
                    "out of memory buffering input; a message was "
                    "dropped");
        return;
    }
    if (n == UV_EOF || n < 0) {
        if (n != UV_EOF)
            mcp_log(io->srv->lg, MCP_LOG_WARNING, "stdin read failed: %s", uv_strerror((int)n));
        uv_read_stop(s);
        io->reading = false;
        on_eof(io);
    }
}

static void on_file_read(uv_fs_t *req)
{
    mcp_stdio_t *io = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    io->read_busy = false;
    if (n > 0) {
        if (mcp_framer_feed(&io->framer, io->read_buf, (size_t)n) < 0)
            mcp_log(io->srv->lg, MCP_LOG_ERROR, "out of memory buffering input");
        if (!io->stopping) start_reading(io);
        maybe_done(io);
        return;
    }
    io->reading = false;
    if (n < 0) mcp_log(io->srv->lg, MCP_LOG_WARNING, "stdin read failed: %s", uv_strerror((int)n));
    if (!io->stopping) on_eof(io);
    maybe_done(io);
}

static void start_reading(mcp_stdio_t *io)
{
    if (io->stopping || io->read_paused) return;
    if (io->in_is_file) {
        if (io->read_busy) return;
        uv_buf_t buf = uv_buf_init(io->read_buf, STDIO_READ_CHUNK);
        io->read_req.data = io;
        if (uv_fs_read(io->srv->loop, &io->read_req, io->in_fd, &buf, 1, -1, on_file_read) == 0) {
            io->read_busy = true;
            io->reading = true;
        } else {
            on_eof(io);
        }
        return;
    }
    if (!io->reading && uv_read_start(&io->in.stream, alloc_cb, on_stream_read) == 0)
        io->reading = true;
}

/* --- lifecycle ----------------------------------------------------------------------------- */

/* Output still queued is dropped: free is called after done, when none is (a write in flight
 * would still use its buffer). */
static void release(mcp_stdio_t *io)
{
    mcp_framer_close(&io->framer);
    ptc_buf_free(&io->pending);
    ptc_buf_free(&io->flight);
    free(io->read_buf);
    free(io);
}

static void on_handle_closed(uv_handle_t *h)
{
    mcp_stdio_t *io = h->data;
    if (--io->open_handles == 0 && io->freed) release(io);
}

static void close_handle(mcp_stdio_t *io, uv_handle_t *h)
{
    if (h->type == UV_UNKNOWN_HANDLE || uv_is_closing(h)) return;
    h->data = io;
    uv_close(h, on_handle_closed);
}

static void on_defer(uv_timer_t *t)
{
    mcp_stdio_t *io = t->data;
    if (io->done || !io->session_idle) return;
    if (io->queued_bytes > 0 || io->read_busy) return; /* maybe_done runs again when they end */
    io->done = true;
    io->done_cb(io, io->done_data);
}

static void maybe_done(mcp_stdio_t *io)
{
    if (io->done || !io->session_idle || io->queued_bytes > 0 || io->read_busy) return;
    /* Report from a fresh loop turn, so the owner may free us with nothing of ours on the
     * stack. */
    uv_timer_start(&io->defer, on_defer, 0, 0);
}

static void on_session_idle(mcp_session_t *s, void *data)
{
    mcp_stdio_t *io = data;
    (void)s;
    io->session_idle = true;
    maybe_done(io);
}

void mcp_stdio_stop(mcp_stdio_t *io)
{
    if (io->stopping) return;
    io->stopping = true;
    if (io->reading && !io->in_is_file) {
        uv_read_stop(&io->in.stream);
        io->reading = false;
    }
    /* The signal handlers stay: a signal during the stop cuts the grace period short. Their
     * handles are unreferenced so that they do not keep the loop alive. */
    uv_unref((uv_handle_t *)&io->sig_int);
    uv_unref((uv_handle_t *)&io->sig_term);
    mcp_session_shutdown(io->session, on_session_idle, io);
}

static void on_signal(uv_signal_t *h, int signum)
{
    mcp_stdio_t *io = h->data;
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    if (io->stopping) {
        mcp_log(io->srv->lg, MCP_LOG_INFO, "received %s while stopping; cancelling work in flight",
                name);
        mcp_session_shutdown(io->session, on_session_idle, io);
        return;
    }
    mcp_log(io->srv->lg, MCP_LOG_INFO, "received %s; finishing work in flight", name);
    mcp_stdio_stop(io);
}

static int open_stream(uv_loop_t *loop, int fd, stdio_stream_t *st, bool *is_file, bool readable)
{
    uv_handle_type t = uv_guess_handle(fd);
    int rc;
    switch (t) {
    case UV_TTY:
        rc = uv_tty_init(loop, &st->tty, fd, readable);
        break;
    case UV_NAMED_PIPE:
        rc = uv_pipe_init(loop, &st->pipe, 0);
        if (rc == 0) rc = uv_pipe_open(&st->pipe, fd);
        break;
    case UV_TCP:
        rc = uv_tcp_init(loop, &st->tcp);
        if (rc == 0) rc = uv_tcp_open(&st->tcp, fd);
        break;
    case UV_FILE:
    case UV_UNKNOWN_HANDLE:
    default:
        /* Regular files and character devices such as /dev/null cannot be polled: they are
         * read and written through the thread pool instead. */
        *is_file = true;
        return 0;
    }
    *is_file = false;
    return rc;
}

int mcp_stdio_start(mcp_server_t *srv, int in_fd, int out_fd, size_t max_message_bytes,
                    mcp_stdio_done_cb done_cb, void *data, mcp_stdio_t **out)
{
    *out = NULL;
    if (done_cb == NULL || max_message_bytes == 0) return MCP_EINVAL;
    mcp_stdio_t *io = calloc(1, sizeof *io);
    if (io == NULL) return MCP_ENOMEM;
    uv_loop_t *loop = srv->loop;
    io->srv = srv;
    io->in_fd = in_fd;
    io->out_fd = out_fd;
    io->max_message = max_message_bytes;
    io->done_cb = done_cb;
    io->done_data = data;
    io->ops.send = stdio_send;
    io->ops.send_json = stdio_send_json;
    ptc_buf_init(&io->pending, PTC_CAP_STDIO_OUTPUT_BUFFER);
    ptc_buf_init(&io->flight, PTC_CAP_STDIO_OUTPUT_BUFFER);
    io->read_buf = malloc(STDIO_READ_CHUNK);
    int rc =
        io->read_buf ? mcp_framer_init(&io->framer, max_message_bytes, on_line, io) : MCP_ENOMEM;
    if (rc < 0) {
        release(io);
        return rc;
    }
    /* Handles are initialised one by one; each counts toward open_handles so that a partial
     * start can be closed the same way as a full one. */
    rc = uv_timer_init(loop, &io->defer);
    if (rc == 0) {
        io->open_handles++;
        io->defer.data = io;
        rc = uv_prepare_init(loop, &io->flush);
    }
    if (rc == 0) {
        io->open_handles++;
        io->flush.data = io;
        rc = uv_signal_init(loop, &io->sig_int);
    }
    if (rc == 0) {
        io->open_handles++;
        io->sig_int.data = io;
        rc = uv_signal_init(loop, &io->sig_term);
    }
    if (rc == 0) {
        io->open_handles++;
        io->sig_term.data = io;
        rc = open_stream(loop, in_fd, &io->in, &io->in_is_file, true);
    }
    if (rc == 0) {
        if (!io->in_is_file) {
            io->open_handles++;
            io->in_open = true;
            io->in.handle.data = io;
        }
        rc = open_stream(loop, out_fd, &io->out, &io->out_is_file, false);
    }
    if (rc == 0) {
        if (!io->out_is_file) {
            io->open_handles++;
            io->out.handle.data = io;
        }
        io->out_open = true;
        rc = mcp_session_new(srv, &io->ops, io, &io->session);
    }
    if (rc == 0) rc = uv_signal_start(&io->sig_int, on_signal, SIGINT);
    if (rc == 0) rc = uv_signal_start(&io->sig_term, on_signal, SIGTERM);
    if (rc != 0) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "stdio transport: %s",
                rc < 0 && rc >= MCP_ESTATE ? mcp_strerror(rc) : uv_strerror(rc));
        io->done = true;
        mcp_stdio_free(io);
        return MCP_EIO;
    }
    start_reading(io);
    *out = io;
    return MCP_OK;
}

void mcp_stdio_free(mcp_stdio_t *io)
{
    if (io == NULL) return;
    if (io->session != NULL) {
        mcp_session_free(io->session);
        io->session = NULL;
    }
    io->freed = true;
    close_handle(io, (uv_handle_t *)&io->defer);
    close_handle(io, (uv_handle_t *)&io->flush);
    close_handle(io, (uv_handle_t *)&io->sig_int);
    close_handle(io, (uv_handle_t *)&io->sig_term);
    if (io->in_open) close_handle(io, &io->in.handle);
    if (io->out_open && !io->out_is_file) close_handle(io, &io->out.handle);
    if (io->open_handles == 0) release(io);
}
