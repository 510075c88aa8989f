/* prompts.c - the prompts ptc-mcp offers: how to get the most out of execute_code and
 * search_tools, for clients that show prompts to the user (as slash commands, say) rather than
 * the server's instructions to the model. */
#include "tools.h"

#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char guide[] =
    "You can run Python 3 with the execute_code tool of ptc-mcp. How to use it well:\n"
    "- Write one script that does the whole job and prints only the result that matters; every "
    "call starts in a fresh sandbox (no network, no state kept between calls).\n"
    "- Tools of the configured MCP servers are Python functions inside the script: "
    "`from tools.SERVER import TOOL`, or `tools.search(\"what you need\")` to find them. Call "
    "many of them in one script, filter and join their results in Python, and print a short "
    "summary instead of passing raw tool output back through the conversation.\n"
    "- Use search_tools to find tools by meaning when you do not know their names; it returns "
    "ids, descriptions and input schemas.\n"
    "- Long output is paged: when the result ends with a cursor line, call execute_code with "
    "only that cursor to read the next page.\n"
    "- Set timeout_seconds for long work; a failed run reports its status, exit code and "
    "stderr, so fix the script and run it again.";

static int get_guide(const char *name, const cJSON *args, void *data, cJSON **messages, char *msg,
                     size_t msg_size)
{
    (void)name;
    (void)data;
    (void)msg;
    (void)msg_size;
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(args, "task");
    size_t cap = sizeof guide + PTC_CAP_PROMPT_TASK + 64;
    char *text = malloc(cap);
    if (text == NULL) return MCP_ENOMEM;
    if (cJSON_IsString(task) && task->valuestring[0] != '\0') {
        size_t n = strlen(task->valuestring);
        /* cut before a character the cap would split: the text stays valid UTF-8 */
        size_t keep = ptc_utf8_cut(task->valuestring, n, PTC_CAP_PROMPT_TASK);
        snprintf(text, cap, "%s\n\nThe task: %.*s%s", guide, (int)keep, task->valuestring,
                 n > keep ? " [task cut]" : "");
    } else {
        snprintf(text, cap, "%s", guide);
    }
    cJSON *arr = cJSON_CreateArray();
    cJSON *m = cJSON_CreateObject();
    cJSON *block = mcp_text_block(text);
    free(text);
    if (arr == NULL || m == NULL || block == NULL || !cJSON_AddItemToArray(arr, m)) {
        cJSON_Delete(block);
        cJSON_Delete(m);
        cJSON_Delete(arr);
        return MCP_ENOMEM;
    }
    /* m belongs to arr now. */
    if (cJSON_AddStringToObject(m, "role", "user") == NULL ||
        !cJSON_AddItemToObject(m, "content", block)) {
        cJSON_Delete(block);
        cJSON_Delete(arr);
        return MCP_ENOMEM;
    }
    *messages = arr;
    return MCP_OK;
}

int ptc_prompts_register(mcp_server_t *srv)
{
    static const mcp_prompt_arg_t args[] = {
        {.name = "task",
         .description = "What you want done; it follows the guidance in the prompt",
         .required = false},
    };
    const mcp_prompt_def_t def = {
        .name = "execute_code_guide",
        .title = "Use ptc-mcp's execute_code well",
        .description = "Guidance for solving a task with one sandboxed Python script that calls "
                       "the configured servers' tools (and search_tools to find them)",
        .args = args,
        .n_args = 1,
        .get = get_guide,
    };
    return mcp_server_add_prompt(srv, &def);
}
