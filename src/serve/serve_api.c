#include "serve/serve_api.h"

#include "serve/serve_struct.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int api_refuse(struct api_error *e, const char *param, const char *code, const char *fmt, ...) {
    e->status = 400;
    e->param = param;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* An optional number in [lo, hi]; integral when asked. */
static int get_number(const cJSON *root, const char *name, double lo, double hi, bool integral, bool *given,
                      double *out, struct api_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *given = false;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v)) return api_refuse(e, name, NULL, "'%s' must be a number", name);
    double d = v->valuedouble;
    if (integral && !(d >= lo && d <= hi && d == floor(d))) /* integers in full: 2^53 - 1, not 9.0072e+15 */
        return api_refuse(e, name, NULL, "'%s' must be an integer from %.0f to %.0f", name, lo, hi);
    if (!(d >= lo && d <= hi)) return api_refuse(e, name, NULL, "'%s' must be a number from %g to %g", name, lo, hi);
    *given = true;
    *out = d;
    return 0;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts, joined. */
static char *content_text(const cJSON *c, struct api_error *e) {
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (cJSON_IsNull(c) || !c) return strdup("");
    if (!cJSON_IsArray(c)) return api_refuse(e, "messages", NULL, "a message's content must be a string or an array of parts"), NULL;
    size_t len = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(t)) return api_refuse(e, "messages", NULL, "only text content parts are supported"), NULL;
        len += strlen(t->valuestring);
    }
    char *out = malloc(len + 1);
    if (!out) return NULL;
    out[0] = 0;
    cJSON_ArrayForEach(part, c) strcat(out, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
    return out;
}

/* The prompt text: the chat template over the messages, or "prompt". */
static char *prompt_text(const moex_model *m, const cJSON *root, bool chat, size_t *len, struct api_error *e) {
    if (!chat) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
        if (!cJSON_IsString(p))
            return api_refuse(e, "prompt", NULL, "'prompt' must be a string, an array of one string, or token ids"), NULL;
        *len = strlen(p->valuestring);
        return strdup(p->valuestring);
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : 0;
    if (n == 0) return api_refuse(e, "messages", NULL, "'messages' must be a non-empty array"), NULL;
    struct moex_chat_message *cm = calloc((size_t)n, sizeof *cm);
    char *text = NULL;
    if (!cm) return NULL;
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool") &&
            strcmp(r, "developer")) {
            api_refuse(e, "messages", NULL, "message %d: 'role' must be system, user, assistant or tool", i);
            goto done;
        }
        cm[i].role = strcmp(r, "developer") ? r : "system";
        if (!(cm[i].content = content_text(cJSON_GetObjectItemCaseSensitive(msg, "content"), e))) goto done;
        i++;
    }
    bool think = true;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    const cJSON *et = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking");
    if (cJSON_IsBool(et)) think = cJSON_IsTrue(et);
    if (!(text = serve_struct_chat_apply(m, root, cm, n, think, len))) api_refuse(e, "messages", NULL, "%s", moex_last_error());
done:
    for (int k = 0; k < n; k++) free((char *)cm[k].content);
    free(cm);
    return text;
}

static int parse_stop(const cJSON *root, struct serve_job *j, struct api_error *e) {
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (!stop || cJSON_IsNull(stop)) return 0;
    if (cJSON_IsString(stop)) {
        if (!stop->valuestring[0]) return 0;
        return (j->stop[j->n_stop++] = strdup(stop->valuestring)) ? 0 : api_refuse(e, "stop", NULL, "out of memory");
    }
    if (!cJSON_IsArray(stop) || cJSON_GetArraySize(stop) > SERVE_MAX_STOP)
        return api_refuse(e, "stop", NULL, "'stop' must be a string or an array of at most %d strings", SERVE_MAX_STOP);
    const cJSON *s;
    cJSON_ArrayForEach(s, stop) {
        if (!cJSON_IsString(s)) return api_refuse(e, "stop", NULL, "'stop' must hold strings");
        if (!s->valuestring[0]) continue;
        if (!(j->stop[j->n_stop++] = strdup(s->valuestring))) return api_refuse(e, "stop", NULL, "out of memory");
    }
    return 0;
}

/* A completions prompt of token ids. */
static int prompt_ids(const moex_model *m, const cJSON *p, struct serve_job *j, struct api_error *e) {
    int n = cJSON_GetArraySize(p), n_vocab = moex_model_n_vocab(m);
    if (!(j->prompt = malloc(sizeof *j->prompt * (size_t)n))) return api_refuse(e, NULL, NULL, "out of memory");
    const cJSON *t;
    cJSON_ArrayForEach(t, p) {
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!(d >= 0 && d < n_vocab && d == floor(d)))
            return api_refuse(e, "prompt", NULL, "'prompt' as token ids: each must be an integer from 0 to %d", n_vocab - 1);
        j->prompt[j->n_prompt++] = (int32_t)d;
    }
    return 0;
}

/* ---- The request's fields. Every field of the OpenAI chat and completions
 * APIs is here: read by api_parse, left to the structured output and tool
 * code (STRUCT_FIELD), or refused by name with the reason. Fields that are
 * no OpenAI field are ignored (moex's own, top_k and the like, are read). */
enum field_use { USED, STRUCT_FIELD, REFUSED, OTHER_ENDPOINT };
#define CHAT 1
#define COMPL 2
static const struct {
    const char *name;
    unsigned where;                    /* CHAT | COMPL: the endpoints that define it */
    enum field_use use;
    const char *why;                   /* REFUSED: the reason */
} fields[] = {
    { "model", CHAT | COMPL, USED, NULL },
    { "messages", CHAT, USED, NULL },
    { "prompt", COMPL, USED, NULL },
    { "frequency_penalty", CHAT | COMPL, USED, NULL },
    { "presence_penalty", CHAT | COMPL, USED, NULL },
    { "logit_bias", CHAT | COMPL, USED, NULL },
    { "logprobs", CHAT | COMPL, USED, NULL },
    { "top_logprobs", CHAT, USED, NULL },
    { "max_tokens", CHAT | COMPL, USED, NULL },
    { "max_completion_tokens", CHAT, USED, NULL },
    { "n", CHAT | COMPL, USED, NULL },
    { "best_of", COMPL, USED, NULL },
    { "echo", COMPL, USED, NULL },
    { "suffix", COMPL, USED, NULL },
    { "seed", CHAT | COMPL, USED, NULL },
    { "stop", CHAT | COMPL, USED, NULL },
    { "stream", CHAT | COMPL, USED, NULL },
    { "stream_options", CHAT | COMPL, USED, NULL },
    { "temperature", CHAT | COMPL, USED, NULL },
    { "top_p", CHAT | COMPL, USED, NULL },
    { "user", CHAT | COMPL, USED, NULL },
    { "safety_identifier", CHAT, USED, NULL },
    { "prompt_cache_key", CHAT, USED, NULL },
    { "store", CHAT, USED, NULL },
    { "service_tier", CHAT, USED, NULL },
    { "modalities", CHAT, USED, NULL },
    { "response_format", CHAT, STRUCT_FIELD, NULL },
    { "tools", CHAT, STRUCT_FIELD, NULL },
    { "tool_choice", CHAT, STRUCT_FIELD, NULL },
    { "parallel_tool_calls", CHAT, STRUCT_FIELD, NULL },
    { "audio", CHAT, REFUSED, "audio output is not supported (the models are text only)" },
    { "functions", CHAT, REFUSED, "'functions' is deprecated: use 'tools'" },
    { "function_call", CHAT, REFUSED, "'function_call' is deprecated: use 'tool_choice'" },
    { "prediction", CHAT, REFUSED, "predicted outputs are not supported" },
    { "web_search_options", CHAT, REFUSED, "web search is not supported" },
    { "reasoning_effort", CHAT, REFUSED,
      "reasoning_effort is not supported: use chat_template_kwargs.enable_thinking (true or false)" },
    { "verbosity", CHAT, REFUSED, "verbosity is not supported" },
    { "metadata", CHAT, REFUSED, "metadata is for stored completions, which are not supported" },
};

/* Refuses the OpenAI fields this endpoint does not take, by name. */
static int check_fields(const cJSON *root, bool chat, struct api_error *e) {
    const cJSON *f;
    cJSON_ArrayForEach(f, root) {
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            if (strcmp(f->string, fields[i].name)) continue;
            if (!(fields[i].where & (chat ? CHAT : COMPL)))
                return api_refuse(e, fields[i].name, "unsupported_parameter", "'%s' is a field of %s, not of %s",
                              fields[i].name, chat ? "/v1/completions" : "/v1/chat/completions",
                              chat ? "/v1/chat/completions" : "/v1/completions");
            if (fields[i].use == REFUSED && !cJSON_IsNull(f))
                return api_refuse(e, fields[i].name, "unsupported_parameter", "'%s': %s", fields[i].name, fields[i].why);
            break;
        }
    }
    return 0;
}

/* A JSON string escape of U+0000 in the body: cJSON would end the string
 * there, so such text is refused rather than cut. */
static bool has_nul_escape(const char *body, size_t len) {
    for (size_t i = 0; i + 6 <= len; i++) {
        if (body[i] != '\\') continue;
        if (body[i + 1] == 'u' && !memcmp(body + i + 2, "0000", 4)) return true;
        i++; /* an escaped character, a backslash among them, is skipped */
    }
    return memchr(body, 0, len) != NULL;
}

static uint64_t random_seed(void) {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)serve_time_ns() * 0x9E3779B97F4A7C15ull;
    return seed & ((1ull << 53) - 1); /* exact in a JSON number */
}

/* logit_bias: {"token id": bias in [-100, 100], ...}. */
static int parse_logit_bias(const moex_model *m, const cJSON *root, struct serve_job *j, struct api_error *e) {
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    if (!lb || cJSON_IsNull(lb)) return 0;
    if (!cJSON_IsObject(lb)) return api_refuse(e, "logit_bias", NULL, "'logit_bias' must be an object of token id: bias");
    int n = cJSON_GetArraySize(lb), n_vocab = moex_model_n_vocab(m);
    j->bias_id = malloc(sizeof *j->bias_id * (size_t)(n ? n : 1));
    j->bias = malloc(sizeof *j->bias * (size_t)(n ? n : 1));
    if (!j->bias_id || !j->bias) return api_refuse(e, NULL, NULL, "out of memory");
    const cJSON *b;
    cJSON_ArrayForEach(b, lb) {
        char *end;
        long id = strtol(b->string, &end, 10);
        if (!b->string[0] || *end || id < 0 || id >= n_vocab)
            return api_refuse(e, "logit_bias", NULL, "logit_bias: '%s' is not a token id (0 to %d)", b->string, n_vocab - 1);
        if (!cJSON_IsNumber(b) || !(b->valuedouble >= -100 && b->valuedouble <= 100))
            return api_refuse(e, "logit_bias", NULL, "logit_bias: the bias of %ld must be a number from -100 to 100", id);
        j->bias_id[j->n_bias] = (int32_t)id;
        j->bias[j->n_bias++] = (float)b->valuedouble;
    }
    return 0;
}

/* The fields that set how tokens are drawn. */
static int api_sampler_fields(const moex_model *m, const cJSON *root, struct api_request *r, struct serve_job *j,
                              struct api_error *e) {
    bool given;
    double d;
    moex_sampler_params_default(&j->sampler);
    if (get_number(root, "temperature", 0, 100, false, &given, &d, e)) return -1;
    if (given) j->sampler.temperature = (float)d;
    if (get_number(root, "top_p", 0, 1, false, &given, &d, e)) return -1;
    if (given) j->sampler.top_p = (float)d;
    if (get_number(root, "top_k", 0, 1 << 24, true, &given, &d, e)) return -1;
    if (given) j->sampler.top_k = (int)d;
    if (get_number(root, "min_p", 0, 1, false, &given, &d, e)) return -1;
    if (given) j->sampler.min_p = (float)d;
    if (get_number(root, "repeat_penalty", 0.01, 100, false, &given, &d, e)) return -1;
    if (given) j->sampler.repeat_penalty = (float)d;
    if (get_number(root, "presence_penalty", -2, 2, false, &given, &d, e)) return -1;
    if (given) j->presence_penalty = (float)d;
    if (get_number(root, "frequency_penalty", -2, 2, false, &given, &d, e)) return -1;
    if (given) j->frequency_penalty = (float)d;
    if (get_number(root, "seed", 0, 9007199254740991.0, true, &given, &d, e)) return -1;
    r->seed = given ? (uint64_t)d : random_seed();
    j->sampler.seed = r->seed;
    return parse_logit_bias(m, root, j, e);
}

/* logprobs: chat's boolean and top_logprobs, or completions' count. */
static int parse_logprobs(const cJSON *root, struct api_request *r, struct serve_job *j, struct api_error *e) {
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
    bool given;
    double d;
    if (r->chat) {
        if (lp && !cJSON_IsNull(lp) && !cJSON_IsBool(lp)) return api_refuse(e, "logprobs", NULL, "'logprobs' must be a boolean");
        r->logprobs = cJSON_IsTrue(lp);
        if (get_number(root, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, true, &given, &d, e)) return -1;
        if (given && !r->logprobs) return api_refuse(e, "top_logprobs", NULL, "'top_logprobs' needs 'logprobs': true");
        r->top_logprobs = given ? (int)d : 0;
    } else {
        if (get_number(root, "logprobs", 0, 5, true, &given, &d, e)) return -1;
        r->logprobs = given;
        r->top_logprobs = given ? (int)d : 0;
    }
    j->logprobs = r->logprobs;
    j->top_logprobs = r->top_logprobs;
    return 0;
}

/* The fields accepted for what they say of no consequence here, checked
 * so that what is accepted is what works. */
static int check_accepted(const cJSON *root, struct api_request *r, struct api_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "store");
    if (cJSON_IsTrue(v)) return api_refuse(e, "store", "unsupported_parameter", "'store': stored completions are not supported");
    v = cJSON_GetObjectItemCaseSensitive(root, "service_tier");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && (!strcmp(v->valuestring, "auto") || !strcmp(v->valuestring, "default"))))
        return api_refuse(e, "service_tier", "unsupported_parameter", "'service_tier': only \"auto\" and \"default\"");
    v = cJSON_GetObjectItemCaseSensitive(root, "modalities");
    if (v && !cJSON_IsNull(v) &&
        !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 && cJSON_IsString(cJSON_GetArrayItem(v, 0)) &&
          !strcmp(cJSON_GetArrayItem(v, 0)->valuestring, "text")))
        return api_refuse(e, "modalities", "unsupported_parameter", "'modalities': only [\"text\"]");
    v = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
        return api_refuse(e, "suffix", "unsupported_parameter", "'suffix': insertion (fill in the middle) is not supported by these models");
    v = cJSON_GetObjectItemCaseSensitive(root, "echo");
    if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v)) return api_refuse(e, "echo", NULL, "'echo' must be a boolean");
    r->echo = cJSON_IsTrue(v);
    if (r->echo && r->logprobs)
        return api_refuse(e, "echo", "unsupported_parameter", "'echo' with 'logprobs' (the prompt's log-probabilities) is not supported");
    v = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (!v || cJSON_IsNull(v)) v = cJSON_GetObjectItemCaseSensitive(root, "safety_identifier");
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) return api_refuse(e, "user", NULL, "'user' must be a string");
    if (cJSON_IsString(v)) snprintf(r->user, sizeof r->user, "%s", v->valuestring);
    v = cJSON_GetObjectItemCaseSensitive(root, "prompt_cache_key");
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) return api_refuse(e, "prompt_cache_key", NULL, "'prompt_cache_key' must be a string");
    return 0;
}

/* "reasoning_format": "none" keeps a <think> block in the content; "deepseek"
 * (or "auto") returns it as reasoning_content; the server's flag is the default. */
static int parse_reasoning(const cJSON *root, const struct serve_options *o, struct api_request *r, struct api_error *e) {
    r->split_reasoning = r->chat && !o->reasoning_inline;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "reasoning_format");
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "none") && strcmp(v->valuestring, "deepseek") &&
                               strcmp(v->valuestring, "auto")))
        return api_refuse(e, "reasoning_format", NULL, "'reasoning_format' must be \"none\", \"deepseek\" or \"auto\"");
    r->split_reasoning = r->chat && strcmp(v->valuestring, "none");
    return 0;
}

/* Whether the prompt ends by opening a <think> block (the generation prompt
 * of a template that starts the model thinking): only white space after it. */
static bool ends_in_think(const char *text, size_t len) {
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ')) len--;
    return len >= 7 && !memcmp(text + len - 7, "<think>", 7);
}

int api_parse(const moex_model *m, const struct serve_options *o, int n_ctx, const char *body, size_t len,
              struct api_request *r, struct serve_job *j, struct api_error *e) {
    if (has_nul_escape(body, len))
        return api_refuse(e, NULL, NULL, "the body holds U+0000 (NUL) in a string, which moex does not take in text");
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) return api_refuse(e, NULL, NULL, "the body is not valid JSON");
    int rc = -1;
    char *text = NULL;
    if (!cJSON_IsObject(root)) { api_refuse(e, NULL, NULL, "the body must be a JSON object"); goto done; }
    if (check_fields(root, r->chat, e)) goto done;
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(root, "stream");
    if (stream && !cJSON_IsBool(stream) && !cJSON_IsNull(stream)) { api_refuse(e, "stream", NULL, "'stream' must be a boolean"); goto done; }
    r->stream = cJSON_IsTrue(stream);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so) && !cJSON_IsObject(so)) { api_refuse(e, "stream_options", NULL, "'stream_options' must be an object"); goto done; }
    const cJSON *iu = cJSON_GetObjectItemCaseSensitive(so, "include_usage");
    if (iu && !cJSON_IsBool(iu) && !cJSON_IsNull(iu)) { api_refuse(e, "stream_options", NULL, "'include_usage' must be a boolean"); goto done; }
    r->include_usage = cJSON_IsTrue(iu);
    if (r->include_usage && !r->stream) { api_refuse(e, "stream_options", NULL, "'stream_options' needs 'stream': true"); goto done; }
    bool given;
    double d;
    if (get_number(root, "n", 1, API_MAX_N, true, &given, &d, e)) goto done;
    r->n = given ? (int)d : 1;
    if (get_number(root, "best_of", 1, API_MAX_N, true, &given, &d, e)) goto done;
    if (given && (int)d != r->n) { api_refuse(e, "best_of", "unsupported_parameter", "'best_of' other than n is not supported"); goto done; }
    const struct serve_limits *lim = &o->limits;
    j->max_tokens = lim->max_tokens;
    if (get_number(root, "max_tokens", 1, lim->max_tokens, true, &given, &d, e)) goto done;
    if (given) j->max_tokens = (int)d;
    if (get_number(root, "max_completion_tokens", 1, lim->max_tokens, true, &given, &d, e)) goto done;
    if (given) j->max_tokens = (int)d;
    /* The sampler's settings (the scheduler makes the sampler from them: serve_sched.c assign()). */
    if (api_sampler_fields(m, root, r, j, e)) goto done;
    if (parse_logprobs(root, r, j, e) || check_accepted(root, r, e) || parse_reasoning(root, o, r, e)) goto done;
    if (parse_stop(root, j, e)) goto done;
    if (serve_struct_parse(m, root, r->chat, j, e)) goto done;
    r->structured = j->structured;
    size_t text_len = 0;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!r->chat && cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0 && cJSON_IsNumber(cJSON_GetArrayItem(p, 0))) {
        if (prompt_ids(m, p, j, e)) goto done; /* a prompt of token ids */
        size_t n = 0;
        text = moex_detokenize(m, j->prompt, j->n_prompt, &n);
        text_len = n;
    } else {
        if (!(text = prompt_text(m, root, r->chat, &text_len, e))) {
            if (!e->message[0]) api_refuse(e, NULL, NULL, "out of memory");
            goto done;
        }
        j->prompt = moex_tokenize_alloc(m, text, text_len, true, true, &j->n_prompt);
        if (!j->prompt) { api_refuse(e, NULL, NULL, "%s", moex_last_error()); goto done; }
    }
    int most = lim->max_prompt_tokens < n_ctx ? lim->max_prompt_tokens : n_ctx;
    if (j->n_prompt > most) {
        api_refuse(e, r->chat ? "messages" : "prompt", "context_length_exceeded",
               "the prompt is %d tokens, more than the %d this server takes (%s)", j->n_prompt, most,
               most == n_ctx ? "--ctx" : "--max-prompt-tokens");
        goto done;
    }
    if (j->n_prompt == 0) { api_refuse(e, "prompt", NULL, "the prompt has no tokens"); goto done; }
    r->think_open = r->chat && text && ends_in_think(text, text_len);
    if (r->echo) {
        r->prompt_text = text;
        r->prompt_len = text_len;
        text = NULL;
    }
    rc = 0;
done:
    free(text);
    cJSON_Delete(root);
    return rc;
}

void api_request_free(struct api_request *r) {
    free(r->prompt_text);
    r->prompt_text = NULL;
}

struct serve_job *api_job_copy(const struct serve_job *j, int i) {
    struct serve_job *c = serve_job_new();
    if (!c) return NULL;
    c->n_prompt = j->n_prompt;
    c->sampler = j->sampler;
    c->sampler.seed = j->sampler.seed + (uint64_t)i;
    c->max_tokens = j->max_tokens;
    c->deadline_ns = j->deadline_ns;
    c->fd = j->fd;
    c->logprobs = j->logprobs;
    c->top_logprobs = j->top_logprobs;
    c->presence_penalty = j->presence_penalty;
    c->frequency_penalty = j->frequency_penalty;
    c->n_bias = j->n_bias;
    c->prompt = malloc(sizeof *c->prompt * (size_t)j->n_prompt);
    c->bias_id = malloc(sizeof *c->bias_id * (size_t)(j->n_bias ? j->n_bias : 1));
    c->bias = malloc(sizeof *c->bias * (size_t)(j->n_bias ? j->n_bias : 1));
    bool ok = c->prompt && c->bias_id && c->bias;
    if (ok) {
        memcpy(c->prompt, j->prompt, sizeof *c->prompt * (size_t)j->n_prompt);
        if (j->n_bias) {
            memcpy(c->bias_id, j->bias_id, sizeof *c->bias_id * (size_t)j->n_bias);
            memcpy(c->bias, j->bias, sizeof *c->bias * (size_t)j->n_bias);
        }
    }
    for (int k = 0; ok && k < j->n_stop; k++) ok = (c->stop[c->n_stop++] = strdup(j->stop[k])) != NULL;
    if (!ok) { serve_job_unref(c); return NULL; }
    return c;
}
