/* Files out: the records init sends after a run or cell (launcher/launch_session.c has the
   format), parsed and checked against the bounds this side announced. The sandbox is hostile:
   every count, size and name is checked before memory is given to it. */
#include "internal.h"

#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char R_FILE_CAP[] = "larger than the per-file bound";
static const char R_CALL_CAP[] = "the call's bound on file bytes was reached";
static const char R_COUNT[] = "more changed files than the per-call bound";
static const char R_TYPE[] = "not a regular file (links, FIFOs and folders are not followed)";
static const char R_READ[] = "could not be read";

void exec__files_rx_clear(struct exec__files_rx *rx)
{
    for (size_t i = 0; i < rx->n_files; i++) {
        free(rx->owned[i].name);
        free(rx->owned[i].data);
    }
    free(rx->cur_name);
    free(rx->cur_data);
    rx->cur_name = NULL;
    rx->cur_data = NULL;
    rx->n_files = 0;
    rx->file_bytes = 0;
    rx->n_sent = 0;
    rx->state = EXEC__RX_LINE;
    rx->clen = 0;
    rx->active = false;
}

void exec__files_rx_start(struct exec__files_rx *rx, const exec_files_limits_t *lim)
{
    exec__files_rx_clear(rx);
    rx->lim = *lim;
    rx->active = true;
}

void exec__files_rx_free(struct exec__files_rx *rx)
{
    exec__files_rx_clear(rx);
    free(rx->files);
    free(rx->owned);
    rx->files = NULL;
    rx->owned = NULL;
    rx->cap_files = 0;
}

static int push(struct exec__files_rx *rx)
{
    /* Two arrays of one capacity: both grow from the same cap to the same size, and cap_files
     * moves only when both did. Their cap is the bound a record line is refused past (the kept
     * files, then as many omitted ones listed by name); the codes are base's. */
    size_t most = (size_t)rx->lim.count + EXEC_FILES_LIMIT_COUNT;
    size_t cap_f = rx->cap_files, cap_o = rx->cap_files;
    int rc = ptc_array_reserve(&rx->files, &cap_f, rx->n_files + 1, sizeof *rx->files, most);
    if (rc == 0)
        rc = ptc_array_reserve(&rx->owned, &cap_o, rx->n_files + 1, sizeof *rx->owned, most);
    if (rc < 0) return rc;
    rx->cap_files = cap_o;
    rx->owned[rx->n_files] = (struct exec__owned){rx->cur_name, rx->cur_data};
    rx->cur.name = rx->cur_name;
    rx->cur.data = rx->cur_data;
    rx->files[rx->n_files++] = rx->cur;
    rx->cur_name = NULL;
    rx->cur_data = NULL;
    return 0;
}

static const char *omit_reason(const char *word)
{
    if (strcmp(word, "count") == 0) return R_COUNT;
    if (strcmp(word, "budget") == 0) return R_CALL_CAP;
    if (strcmp(word, "type") == 0) return R_TYPE;
    if (strcmp(word, "read") == 0) return R_READ;
    return NULL;
}

/* one record's line: 0, 1 for "D EXIT", EXEC_EINVAL when the sandbox broke the protocol */
static int record_line(struct exec__files_rx *rx, const char *line, int *code)
{
    uint64_t f[3];
    memset(&rx->cur, 0, sizeof rx->cur);
    if (line[0] == 'D' && line[1] == ' ' && ptc_parse_int(line + 2, NULL, code) == 0) {
        rx->active = false;
        return 1;
    }
    if (!rx->active || rx->n_files >= rx->lim.count + EXEC_FILES_LIMIT_COUNT) return EXEC_EINVAL;
    size_t nl;
    if (line[0] == 'F' && ptc_parse_u64s(line + 1, f, 3, NULL) == 0) { /* "F SIZE SENT NAMELEN" */
        uint64_t size = f[0], sent = f[1];
        nl = f[2] <= EXEC_FILE_NAME_MAX ? (size_t)f[2] : 0;
        if (sent > size || sent > rx->lim.file_bytes ||
            rx->file_bytes + sent > rx->lim.call_bytes || rx->n_sent >= rx->lim.count)
            return EXEC_EINVAL;
        rx->cur.size = size;
        rx->cur.len = (size_t)sent;
        rx->cur.truncated = sent < size;
        if (rx->cur.truncated)
            rx->cur.reason = sent == rx->lim.file_bytes ? R_FILE_CAP : R_CALL_CAP;
        rx->file_bytes += sent;
        rx->n_sent++;
    } else if (line[0] == 'O') { /* "O SIZE REASON NAMELEN" */
        const char *p;
        char word[16];
        if (ptc_parse_u64s(line + 1, f, 1, &p) < 0 || *p++ != ' ') return EXEC_EINVAL;
        size_t wl = strcspn(p, " ");
        if (wl == 0 || wl >= sizeof word || ptc_parse_u64s(p + wl, f + 1, 1, NULL) < 0)
            return EXEC_EINVAL;
        memcpy(word, p, wl);
        word[wl] = '\0';
        nl = f[1] <= EXEC_FILE_NAME_MAX ? (size_t)f[1] : 0;
        if (!(rx->cur.reason = omit_reason(word))) return EXEC_EINVAL;
        rx->cur.size = f[0];
        rx->cur.omitted = true;
    } else {
        return EXEC_EINVAL;
    }
    if (nl == 0 || nl > EXEC_FILE_NAME_MAX) return EXEC_EINVAL;
    if (!(rx->cur_name = malloc(nl + 1)) || !(rx->cur_data = malloc(rx->cur.len ? rx->cur.len : 1)))
        return EXEC_ENOMEM;
    rx->name_len = nl;
    rx->need = nl;
    rx->got = 0;
    rx->state = EXEC__RX_NAME;
    return 0;
}

/* bytes of the record being read (its name, then its data) */
static int record_bytes(struct exec__files_rx *rx, const char *p, size_t n, size_t *used)
{
    size_t take = rx->need - rx->got < n ? rx->need - rx->got : n;
    *used = take;
    unsigned char *dst = rx->state == EXEC__RX_NAME ? (unsigned char *)rx->cur_name : rx->cur_data;
    /* a record's buffers exist from its header on: without them the stream is out of step */
    if (dst == NULL) return EXEC_EINVAL;
    memcpy(dst + rx->got, p, take);
    rx->got += take;
    if (rx->got < rx->need) return 0;
    if (rx->state == EXEC__RX_NAME) {
        rx->cur_name[rx->name_len] = '\0';
        if (memchr(rx->cur_name, '/', rx->name_len) || strlen(rx->cur_name) != rx->name_len)
            return EXEC_EINVAL;
        if (rx->cur.len) {
            rx->state = EXEC__RX_DATA;
            rx->need = rx->cur.len;
            rx->got = 0;
            return 0;
        }
    }
    rx->state = EXEC__RX_LINE;
    return push(rx);
}

int exec__files_rx_feed(struct exec__files_rx *rx, const char *p, size_t n, size_t *used, int *code)
{
    size_t off = 0;
    int r = 0;
    while (off < n && r == 0) {
        if (rx->state != EXEC__RX_LINE) {
            size_t u;
            r = record_bytes(rx, p + off, n - off, &u);
            off += u;
            continue;
        }
        char c = p[off++];
        if (c != '\n') {
            if (rx->clen == sizeof rx->line - 1) return EXEC_EINVAL;
            rx->line[rx->clen++] = c;
            continue;
        }
        rx->line[rx->clen] = '\0';
        rx->clen = 0;
        r = record_line(rx, rx->line, code);
    }
    *used = off;
    return r;
}
