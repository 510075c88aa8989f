/* search_tools' results (server/search_results.c): the structuredContent and the text the
 * model reads, from a real lexical registry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tools.h"

static const char tools_gh[] =
    "[{\"name\": \"list_issues\", \"description\": \"List the issues of a repository.\","
    "  \"inputSchema\": {\"type\": \"object\", \"properties\": {\"repo\": {\"type\": \"string\","
    "  \"description\": \"Owner and repository name\"}}}},"
    " {\"name\": \"create_issue\", \"description\": \"Open a new issue in a repository.\"},"
    " {\"name\": \"merge_pull_request\", \"description\": \"Merge a pull request.\"}]";
static const char tools_chat[] =
    "[{\"name\": \"send_message\", \"description\": \"Send a chat message to a channel.\"},"
    " {\"name\": \"list_channels\", \"description\": \"List the channels of a workspace.\"}]";
static const char tools_wx[] =
    "[{\"name\": \"get_forecast\", \"description\": \"Daily weather forecast for a place.\"}]";

static void set_tools(reg_registry_t *r, const char *server, const char *json)
{
    cJSON *arr = cJSON_Parse(json);
    assert_non_null(arr);
    char msg[512] = "";
    int rc = reg_registry_set_server_tools(r, server, arr, msg, sizeof msg);
    if (rc != REG_OK) fail_msg("set_server_tools: %s", msg);
    cJSON_Delete(arr);
}

static reg_registry_t *lexical_registry(bool hybrid)
{
    reg_embedder_t *e;
    assert_int_equal(reg_lexical_new(NULL, &e), REG_OK);
    reg_registry_opts_t o;
    reg_registry_opts_default(&o);
    o.hybrid = hybrid;
    reg_registry_t *r;
    assert_int_equal(reg_registry_new(e, &o, &r), REG_OK);
    set_tools(r, "github", tools_gh);
    set_tools(r, "chat", tools_chat);
    set_tools(r, "weather", tools_wx);
    return r;
}

static void test_results_as_json_and_text(void **state)
{
    (void)state;
    reg_registry_t *r = lexical_registry(true);
    char msg[256];
    assert_int_equal(reg_registry_index_all(r, msg, sizeof msg), REG_OK);
    reg_result_t res[3];
    int n = reg_registry_search(r, "issues of a repository", NULL, 3, NULL, res, msg, sizeof msg);
    assert_true(n >= 1);
    cJSON *j = ptc_search_results_json(r, res, (size_t)n);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "embedder")->valuestring, "lexical");
    cJSON *tools = cJSON_GetObjectItem(j, "tools");
    assert_int_equal(cJSON_GetArraySize(tools), n);
    cJSON *t0 = cJSON_GetArrayItem(tools, 0);
    assert_string_equal(cJSON_GetObjectItem(t0, "id")->valuestring, "github__list_issues");
    assert_string_equal(cJSON_GetObjectItem(t0, "server")->valuestring, "github");
    assert_string_equal(cJSON_GetObjectItem(t0, "name")->valuestring, "list_issues");
    assert_string_equal(cJSON_GetObjectItem(t0, "description")->valuestring,
                        "List the issues of a repository.");
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(t0, "inputSchema"), "properties"));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(t0, "score")));
    cJSON_Delete(j);

    char *text = ptc_search_results_text(res, (size_t)n, 10);
    assert_non_null(text);
    assert_non_null(strstr(text, "1. github__list_issues (score "));
    assert_non_null(strstr(text, ": List the i...")); /* cut at 10 bytes */
    assert_non_null(strstr(text, "| params: repo"));
    free(text);
    text = ptc_search_results_text(NULL, 0, 0);
    assert_string_equal(text, "No matching tools.");
    free(text);
    reg_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_as_json_and_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
