/* The repairers behind one ask handle: the sampling request's params, a sampler's answer (text,
 * none, too long, an error), a request the host answers later, and cancels of each kind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repair.h"

typedef struct fx {
    /* the sampler's view */
    int send_rc;
    int nsent, ncancels;
    cJSON *params; /* the last request's */
    ptc_repair_ask_t *asked;
    bool cancel_ends; /* the end comes during the cancel, as mcp_outreq_cancel's does */
    int token;
    /* the loop's view */
    int ncb, err;
    char reply[64], message[128];
} fx_t;

static int f_send(void *data, cJSON *params, ptc_repair_ask_t *a, void **sent)
{
    fx_t *f = data;
    f->nsent++;
    cJSON_Delete(f->params);
    f->params = params;
    f->asked = a;
    if (f->send_rc < 0) return f->send_rc;
    *sent = &f->token;
    return 0;
}

static void f_cancel(void *data, void *sent)
{
    fx_t *f = data;
    f->ncancels++;
    assert_ptr_equal(sent, &f->token);
    if (f->cancel_ends) ptc_repair_ask_sampled(f->asked, -ECANCELED, NULL, "cancelled");
}

static void on_reply(void *data, int err, const char *reply, const char *message)
{
    fx_t *f = data;
    f->ncb++;
    f->err = err;
    snprintf(f->reply, sizeof f->reply, "%s", reply ? reply : "");
    snprintf(f->message, sizeof f->message, "%s", message ? message : "");
}

static int setup(void **state)
{
    *state = calloc(1, sizeof(fx_t));
    return *state != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    cJSON_Delete(f->params);
    free(f);
    return 0;
}

static ptc_repair_ask_t *ask(fx_t *f)
{
    ptc_repair_sampler_t s = {.send = f_send, .cancel = f_cancel, .data = f};
    ptc_repair_ask_t *a = NULL;
    assert_int_equal(ptc_repair_ask_sampling(&s, "fix this", on_reply, f, &a), 0);
    assert_non_null(a);
    assert_ptr_equal(f->asked, a);
    return a;
}

/* A CreateMessageResult whose content is text. */
static cJSON *message_with(const char *text)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *c = cJSON_AddObjectToObject(r, "content");
    assert_non_null(c);
    cJSON_AddStringToObject(c, "type", "text");
    cJSON_AddStringToObject(c, "text", text);
    cJSON_AddStringToObject(r, "role", "assistant");
    return r;
}

static void the_sampling_request_asks_a_capable_model_with_the_prompt(void **state)
{
    (void)state;
    cJSON *p = ptc_repair_sampling_params("the prompt");
    assert_non_null(p);
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "messages"), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring, "user");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring, "the prompt");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(p, "systemPrompt")->valuestring,
                        ptc_repair_system_prompt);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(p, "includeContext")->valuestring, "none");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(p, "maxTokens")->valueint,
                     PTC_REPAIR_MAX_TOKENS);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(p, "temperature")->valueint, 0);
    const cJSON *prefs = cJSON_GetObjectItemCaseSensitive(p, "modelPreferences");
    double intelligence =
        cJSON_GetObjectItemCaseSensitive(prefs, "intelligencePriority")->valuedouble;
    assert_true(intelligence >
                cJSON_GetObjectItemCaseSensitive(prefs, "speedPriority")->valuedouble);
    assert_true(intelligence >
                cJSON_GetObjectItemCaseSensitive(prefs, "costPriority")->valuedouble);
    cJSON_Delete(p);
}

static void a_sampled_answer_gives_the_loop_its_text(void **state)
{
    fx_t *f = *state;
    ptc_repair_ask_t *a = ask(f);
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(f->params, "messages"), 0);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "content"), "text")
            ->valuestring,
        "fix this");
    assert_int_equal(f->ncb, 0); /* nothing before the answer */
    cJSON *r = message_with("```python\nprint(1)\n```");
    ptc_repair_ask_sampled(a, 0, r, NULL);
    cJSON_Delete(r);
    assert_int_equal(f->ncb, 1);
    assert_int_equal(f->err, 0);
    assert_string_equal(f->reply, "```python\nprint(1)\n```");
}

static void a_sampled_answer_without_text_or_too_long_is_refused(void **state)
{
    fx_t *f = *state;
    ptc_repair_ask_t *a = ask(f);
    cJSON *r = cJSON_Parse("{\"role\":\"assistant\",\"content\":{\"type\":\"image\"}}");
    ptc_repair_ask_sampled(a, 0, r, NULL);
    cJSON_Delete(r);
    assert_int_equal(f->err, PTC_REPAIR_EPROTO);
    assert_string_equal(f->message, "the client's sampling answer holds no text");
    a = ask(f);
    char *big = malloc(PTC_REPAIR_REPLY_MAX + 2);
    assert_non_null(big);
    memset(big, 'x', PTC_REPAIR_REPLY_MAX + 1);
    big[PTC_REPAIR_REPLY_MAX + 1] = '\0';
    r = message_with(big);
    free(big);
    ptc_repair_ask_sampled(a, 0, r, NULL);
    cJSON_Delete(r);
    assert_int_equal(f->err, PTC_REPAIR_ETOOBIG);
    assert_string_equal(f->message, "the client's sampling answer is too long");
    assert_int_equal(f->ncb, 2);
}

static void a_failed_sampling_passes_its_code_and_message_through(void **state)
{
    fx_t *f = *state;
    ptc_repair_ask_t *a = ask(f);
    ptc_repair_ask_sampled(a, -ETIMEDOUT, NULL, "the client did not answer");
    assert_int_equal(f->ncb, 1);
    assert_int_equal(f->err, -ETIMEDOUT);
    assert_string_equal(f->message, "the client did not answer");
}

static void a_request_that_cannot_be_sent_never_calls_back(void **state)
{
    fx_t *f = *state;
    f->send_rc = -ENOTSUP;
    ptc_repair_sampler_t s = {.send = f_send, .cancel = f_cancel, .data = f};
    ptc_repair_ask_t *a = (ptc_repair_ask_t *)&s;
    assert_int_equal(ptc_repair_ask_sampling(&s, "fix this", on_reply, f, &a), -ENOTSUP);
    assert_null(a);
    assert_int_equal(f->nsent, 1);
    assert_int_equal(f->ncb, 0);
}

static void a_cancelled_sampling_drops_its_end_now_or_later(void **state)
{
    fx_t *f = *state;
    f->cancel_ends = true; /* the end comes during the cancel */
    ptc_repair_ask_cancel(ask(f));
    assert_int_equal(f->ncancels, 1);
    f->cancel_ends = false; /* the end comes after the cancel */
    ptc_repair_ask_t *a = ask(f);
    ptc_repair_ask_cancel(a);
    ptc_repair_ask_cancel(a); /* a second cancel does nothing */
    assert_int_equal(f->ncancels, 2);
    cJSON *r = message_with("print(1)");
    ptc_repair_ask_sampled(a, 0, r, NULL);
    cJSON_Delete(r);
    assert_int_equal(f->ncb, 0);
    ptc_repair_ask_cancel(NULL);
}

static void a_later_answer_gives_the_params_and_takes_the_answer(void **state)
{
    fx_t *f = *state;
    cJSON *params = NULL;
    ptc_repair_ask_t *a = NULL;
    assert_int_equal(ptc_repair_ask_later("fix that", on_reply, f, &params, &a), 0);
    assert_non_null(a);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(params, "messages"));
    cJSON_Delete(params);
    assert_int_equal(f->ncb, 0);
    cJSON *r = message_with("print(2)");
    ptc_repair_ask_answer(a, r);
    cJSON_Delete(r);
    assert_int_equal(f->ncb, 1);
    assert_string_equal(f->reply, "print(2)");
    /* A round with no answer in it. */
    assert_int_equal(ptc_repair_ask_later("fix that", on_reply, f, &params, &a), 0);
    cJSON_Delete(params);
    ptc_repair_ask_answer(a, NULL);
    assert_int_equal(f->ncb, 2);
    assert_int_equal(f->err, PTC_REPAIR_EPROTO);
    assert_string_equal(f->message,
                        "the client's next round carried no answer to the sampling request");
    /* Cancelled: the round never comes, nothing is called, nothing leaks. */
    assert_int_equal(ptc_repair_ask_later("fix that", on_reply, f, &params, &a), 0);
    cJSON_Delete(params);
    ptc_repair_ask_cancel(a);
    assert_int_equal(f->ncb, 2);
}

static void the_client_repairs_when_it_can_sample_else_the_fallback(void **state)
{
    (void)state;
    const ptc_repairer_desc_t http = {.id = "http", .who = "w", .by = "b", .asking = "a"};
    char why[200] = "";
    assert_ptr_equal(ptc_repair_pick(true, &http, why, sizeof why), &ptc_repair_sampling_desc);
    assert_string_equal(ptc_repair_sampling_desc.id, "sampling");
    assert_ptr_equal(ptc_repair_pick(true, NULL, why, sizeof why), &ptc_repair_sampling_desc);
    assert_ptr_equal(ptc_repair_pick(false, &http, why, sizeof why), &http);
    assert_string_equal(why, "");
    assert_null(ptc_repair_pick(false, NULL, why, sizeof why));
    assert_string_equal(why, "this client cannot sample (no sampling capability) and no fallback "
                             "repairer is configured (--repair-url)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_sampling_request_asks_a_capable_model_with_the_prompt),
        cmocka_unit_test(the_client_repairs_when_it_can_sample_else_the_fallback),
        cmocka_unit_test_setup_teardown(a_sampled_answer_gives_the_loop_its_text, setup, teardown),
        cmocka_unit_test_setup_teardown(a_sampled_answer_without_text_or_too_long_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_failed_sampling_passes_its_code_and_message_through,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_request_that_cannot_be_sent_never_calls_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_cancelled_sampling_drops_its_end_now_or_later, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_later_answer_gives_the_params_and_takes_the_answer, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("repair_ask", tests, NULL, NULL);
}
