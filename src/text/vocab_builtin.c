/* The built-in vocabulary: byte tokens, then byte-pair merges learned from the
 * English text below (most frequent pair first, ties broken by the smaller
 * pair of ids, so the result never varies), then three control tokens. */
#include "text/vocab_builtin.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

const char builtin_chat_template[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/* Plain English on everyday subjects: enough pairs for about two thousand
 * tokens, so small models tokenize common words in a few pieces. */
static const char training_text[] =
    "The morning was cold and clear, and the light came in low over the hills. "
    "She made a cup of tea, opened the window, and listened to the birds in the garden. "
    "There was a lot to do today: the house needed cleaning, the car had to go to the shop, "
    "and her brother was coming for dinner at seven.\n"
    "When you write a program, you start with a small piece that works and then make it better. "
    "Every function should do one thing, and its name should say what that thing is. "
    "If something goes wrong, the program must report the problem instead of hiding it. "
    "Good tests are written before the bug is fixed, so that the same mistake cannot come back.\n"
    "The train left the station at a quarter past nine. Most of the people on board were going to work, "
    "reading the news on their phones or looking out at the fields and the rivers that passed by. "
    "A child in the next seat asked his mother why the trees were moving, and she laughed.\n"
    "Water boils at one hundred degrees at sea level, but at the top of a high mountain it boils "
    "at a lower temperature because the air pressure is lower. This is why cooking takes longer "
    "in the mountains than it does near the coast.\n"
    "In the history of the world, people have always told stories. Some stories were about heroes "
    "and their long journeys; others were about ordinary families, their work, their friends, and "
    "the places where they lived. Many of these stories were never written down, but they were "
    "remembered and passed from one generation to the next.\n"
    "To make bread, mix flour, water, salt and yeast in a large bowl. Knead the dough for ten minutes "
    "until it is smooth, then leave it in a warm place for an hour. When it has doubled in size, "
    "shape it into a loaf and bake it in a hot oven for about forty minutes.\n"
    "The meeting started late because nobody could find the room. When everyone had finally arrived, "
    "the manager explained the plan for the next year: the company would open two new offices, "
    "hire more engineers, and spend less money on travel. Several people asked questions about "
    "the budget, and the discussion continued until lunch.\n"
    "Computers store numbers as bits, and a byte is eight bits. A model with thirty billion "
    "parameters needs a great deal of memory, so its weights are often stored with fewer bits, "
    "which makes the model smaller and faster while keeping most of its quality. The question "
    "is always how much precision can be removed before the answers become worse.\n"
    "He walked along the beach in the evening, watching the waves and the boats coming back to "
    "the harbour. The sun went down behind the island, and the sky turned orange, then purple, "
    "then dark blue. Somewhere a dog was barking, and the first stars appeared above the sea.\n"
    "Learning a language takes time and practice. At first you know only a few words, and every "
    "sentence is difficult. Later you begin to understand conversations, to read simple books, "
    "and to think in the new language without translating. It is important to speak as often "
    "as possible, even when you make mistakes, because that is how everyone learns.\n"
    "The doctor said that he should rest for a week, drink plenty of water, and avoid heavy work. "
    "If the fever did not go down in three days, he should call again. His wife went to the "
    "pharmacy to buy the medicine while he slept on the sofa.\n"
    "Our city has changed a great deal over the last twenty years. There are more buildings, more "
    "cars, and more people than ever before. The old market is still there, however, and every "
    "Saturday farmers come from the villages to sell fruit, vegetables, cheese, eggs and flowers.\n"
    "Why do some things float while others sink? An object floats when it pushes aside a weight "
    "of water equal to its own weight before it is completely under the surface. A heavy ship "
    "made of steel can float because its shape holds a large volume of air.\n"
    "Thank you for your message. I would be happy to help with the project, but I will not be "
    "available until the end of the month. Could we talk on Monday or Tuesday next week? "
    "Please let me know which time works best for you, and I will send an invitation.\n"
    "The library was quiet except for the sound of pages turning. Students sat at long wooden "
    "tables with their notes and their laptops, preparing for the exams. Outside, the rain "
    "had started again, and the windows were grey with water.\n"
    "Music can change the way we feel. A slow song can make us sad or calm, while a fast one "
    "makes us want to dance. Scientists have found that listening to music we enjoy releases "
    "chemicals in the brain that are linked to pleasure and reward.\n"
    "First, check that the power is off. Then remove the four screws on the back of the panel, "
    "lift the cover carefully, and disconnect the cable on the left side. Replace the old part "
    "with the new one, connect the cable again, and close the cover before you turn the power on.\n"
    "It was the best game of the season. The home team was losing by two points with a minute "
    "left to play, but their youngest player scored twice in the final seconds, and the whole "
    "stadium stood up and shouted. Nobody who was there will ever forget that night.\n"
    "Questions and answers: What is the capital of France? Paris. How many days are there in a "
    "week? Seven. Which planet is closest to the sun? Mercury. What do plants need to grow? "
    "Light, water, air and good soil. Who wrote the letter? I don't know, but I'll find out, "
    "and we're going to ask them if they've seen it.\n";

/* GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
 * others are moved to U+0100 and up. Token i < 256 is the byte whose
 * character comes i-th in that order (Qwen's vocabulary starts the same). */
static int byte_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

static void byte_order(int order[256], unsigned codepoint[256]) {
    int n = 0, extra = 0;
    for (int b = 0; b < 256; b++)
        if (byte_printable(b)) { order[n++] = b; codepoint[b] = (unsigned)b; }
    for (int b = 0; b < 256; b++)
        if (!byte_printable(b)) { order[n++] = b; codepoint[b] = 256u + (unsigned)extra++; }
}

static int put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static int is_letter(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_space(int c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Length of the next piece of s, splitting roughly as the qwen2 regex does
 * for ASCII: contractions, [non-letter]?letters, single digits,
 * ' '?punctuation, newlines, spaces (a run of spaces keeps its last one for
 * the next word). */
static size_t next_piece(const char *s) {
    static const char *const contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    if (s[0] == '\'')
        for (size_t i = 0; i < sizeof contractions / sizeof *contractions; i++) {
            size_t n = strlen(contractions[i]);
            if (!strncmp(s, contractions[i], n)) return n;
        }
    size_t i = 0;
    if (is_letter(s[0]) || (s[0] && !is_digit(s[0]) && s[0] != '\n' && s[0] != '\r' && is_letter(s[1]))) {
        i = is_letter(s[0]) ? 0 : 1;
        while (is_letter(s[i])) i++;
        return i;
    }
    if (is_digit(s[0])) return 1;
    if (!is_space(s[0]) || (s[0] == ' ' && s[1] && !is_space(s[1]))) {
        i = s[0] == ' ' ? 1 : 0;
        while (s[i] && !is_space(s[i]) && !is_letter(s[i]) && !is_digit(s[i])) i++;
        while (s[i] == '\n' || s[i] == '\r') i++;
        return i;
    }
    while (is_space(s[i]) && s[i] != '\n') i++;
    if (s[i] == '\n') { while (s[i] == '\n') i++; return i; }
    if (i > 1 && s[i]) return i - 1;
    return i ? i : 1;
}

/* Training state: distinct pieces with their counts, each a list of token ids. */
struct word {
    int32_t *ids;
    int n, count;
};

struct trainer {
    struct word *words;
    int n_words;
    char **tokens;
    int n_tokens, cap_tokens;
    /* open-addressing table of pair counts, rebuilt every step */
    uint64_t *keys;
    int64_t *counts;
    uint32_t mask;
};

static int add_word(struct trainer *t, const char *s, size_t len, const int byte_id[256]) {
    for (int i = 0; i < t->n_words; i++) {
        struct word *w = &t->words[i];
        if ((size_t)w->n != len) continue;
        int same = 1;
        for (size_t j = 0; j < len && same; j++) same = w->ids[j] == byte_id[(unsigned char)s[j]];
        if (same) { w->count++; return 0; }
    }
    struct word w = { malloc(len * sizeof(int32_t)), (int)len, 1 };
    if (!w.ids) return -1;
    for (size_t j = 0; j < len; j++) w.ids[j] = byte_id[(unsigned char)s[j]];
    struct word *g = realloc(t->words, (size_t)(t->n_words + 1) * sizeof *g);
    if (!g) { free(w.ids); return -1; }
    t->words = g;
    t->words[t->n_words++] = w;
    return 0;
}

static int64_t *pair_slot(struct trainer *t, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    uint32_t i = (uint32_t)(h >> 32) & t->mask;
    while (t->keys[i] != UINT64_MAX && t->keys[i] != key) i = (i + 1) & t->mask;
    if (t->keys[i] == UINT64_MAX) { t->keys[i] = key; t->counts[i] = 0; }
    return &t->counts[i];
}

/* The most frequent adjacent pair; UINT64_MAX when no word has two ids. */
static uint64_t best_pair(struct trainer *t) {
    for (uint32_t i = 0; i <= t->mask; i++) t->keys[i] = UINT64_MAX;
    for (int i = 0; i < t->n_words; i++) {
        const struct word *w = &t->words[i];
        for (int j = 0; j + 1 < w->n; j++)
            *pair_slot(t, (uint64_t)(uint32_t)w->ids[j] << 32 | (uint32_t)w->ids[j + 1]) += w->count;
    }
    uint64_t best = UINT64_MAX;
    int64_t best_count = 0;
    for (uint32_t i = 0; i <= t->mask; i++) {
        if (t->keys[i] == UINT64_MAX) continue;
        if (t->counts[i] > best_count || (t->counts[i] == best_count && t->keys[i] < best)) {
            best = t->keys[i];
            best_count = t->counts[i];
        }
    }
    return best;
}

static int32_t find_token(const struct trainer *t, const char *s) {
    for (int i = t->n_tokens - 1; i >= 0; i--)
        if (!strcmp(t->tokens[i], s)) return i;
    return -1;
}

static int push_token(struct trainer *t, char *s) {
    if (t->n_tokens == t->cap_tokens) {
        int cap = t->cap_tokens ? 2 * t->cap_tokens : 1024;
        char **g = realloc(t->tokens, (size_t)cap * sizeof *g);
        if (!g) return -1;
        t->tokens = g;
        t->cap_tokens = cap;
    }
    t->tokens[t->n_tokens++] = s;
    return 0;
}

static void trainer_free(struct trainer *t) {
    for (int i = 0; i < t->n_words; i++) free(t->words[i].ids);
    free(t->words);
    free(t->keys);
    free(t->counts);
}

/* Runs the training; merges go to *merges (malloc'd strings). */
static int train(struct trainer *t, int max_learned, char ***merges_out, int *n_merges_out) {
    int order[256], byte_id[256];
    unsigned cp[256];
    byte_order(order, cp);
    for (int i = 0; i < 256; i++) {
        char buf[4];
        int n = put_utf8(buf, cp[order[i]]);
        buf[n] = 0;
        byte_id[order[i]] = i;
        char *s = strdup(buf);
        if (!s || push_token(t, s)) { free(s); return -1; }
    }
    size_t total = 0;
    for (const char *s = training_text; *s;) {
        size_t n = next_piece(s);
        if (add_word(t, s, n, byte_id)) return -1;
        s += n;
        total += n;
    }
    t->mask = 1;
    while (t->mask < 4 * total) t->mask = t->mask * 2 + 1;
    t->keys = malloc(((size_t)t->mask + 1) * sizeof *t->keys);
    t->counts = malloc(((size_t)t->mask + 1) * sizeof *t->counts);
    if (!t->keys || !t->counts) return -1;

    char **merges = NULL;
    int n_merges = 0, learned = 0;
    while (learned < max_learned) {
        uint64_t pair = best_pair(t);
        if (pair == UINT64_MAX) break;
        int32_t a = (int32_t)(pair >> 32), b = (int32_t)(uint32_t)pair;
        size_t la = strlen(t->tokens[a]), lb = strlen(t->tokens[b]);
        char *joined = malloc(la + lb + 1), *merge = malloc(la + lb + 2);
        char **g = realloc(merges, (size_t)(n_merges + 1) * sizeof *g);
        if (g) merges = g;
        if (!joined || !merge || !g) { free(joined); free(merge); goto oom; }
        memcpy(joined, t->tokens[a], la);
        memcpy(joined + la, t->tokens[b], lb + 1);
        memcpy(merge, t->tokens[a], la);
        merge[la] = ' ';
        memcpy(merge + la + 1, t->tokens[b], lb + 1);
        merges[n_merges++] = merge;
        int32_t id = find_token(t, joined);
        if (id < 0) {
            id = t->n_tokens;
            if (push_token(t, joined)) { free(joined); goto oom; }
            learned++;
        } else {
            free(joined);
        }
        for (int i = 0; i < t->n_words; i++) {
            struct word *w = &t->words[i];
            int out = 0;
            for (int j = 0; j < w->n; j++) {
                if (j + 1 < w->n && w->ids[j] == a && w->ids[j + 1] == b) { w->ids[out++] = id; j++; }
                else w->ids[out++] = w->ids[j];
            }
            w->n = out;
        }
    }
    *merges_out = merges;
    *n_merges_out = n_merges;
    return 0;
oom:
    for (int i = 0; i < n_merges; i++) free(merges[i]);
    free(merges);
    return -1;
}

int builtin_vocab_make(int max_learned, struct builtin_vocab *v) {
    static const char *const specials[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    memset(v, 0, sizeof *v);
    struct trainer t;
    memset(&t, 0, sizeof t);
    char **merges = NULL;
    int n_merges = 0;
    if (train(&t, max_learned < 0 ? 0 : max_learned, &merges, &n_merges)) goto oom;
    for (int i = 0; i < 3; i++) {
        char *s = strdup(specials[i]);
        if (!s || push_token(&t, s)) { free(s); goto oom; }
    }
    v->types = malloc((size_t)t.n_tokens * sizeof *v->types);
    if (!v->types) goto oom;
    for (int i = 0; i < t.n_tokens; i++) v->types[i] = i < t.n_tokens - 3 ? 1 : 3; /* normal, control */
    v->n_tokens = t.n_tokens;
    v->tokens = t.tokens;
    v->n_merges = n_merges;
    v->merges = merges;
    v->bos_id = v->pad_id = t.n_tokens - 3;
    v->im_start_id = t.n_tokens - 2;
    v->eos_id = v->im_end_id = t.n_tokens - 1;
    trainer_free(&t);
    return 0;
oom:
    for (int i = 0; i < n_merges; i++) free(merges[i]);
    free(merges);
    for (int i = 0; i < t.n_tokens; i++) free(t.tokens[i]);
    free(t.tokens);
    trainer_free(&t);
    free(v->types);
    memset(v, 0, sizeof *v);
    return moex_errorf("built-in vocabulary: out of memory");
}

void builtin_vocab_free(struct builtin_vocab *v) {
    for (int i = 0; i < v->n_tokens; i++) free(v->tokens[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->merges);
    free(v->types);
    memset(v, 0, sizeof *v);
}
