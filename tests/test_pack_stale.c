/* A pack file is tied to the model file it was packed from, not only to its
 * sampled hash: an in-place edit of expert bytes between the samples, or
 * only a new modification time, makes the pack refused with the reason and
 * the line that rebuilds it; the same file untouched keeps it. What is not
 * detected (an edit whose time was set back) is checked as documented in
 * docs/pack-format.md. On a tiny synthetic model. */
#include "moex_tools.h"

#include "harness.h"

#include "gguf/gguf.h"
#include "pack/packfile.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char model_path[4096], pack_path[4096];

struct heard {
    char text[8192];
    uint64_t loads, packs;     /* experts filled from the pack file; packed live */
};

static void on_log(void *user, enum moex_log_level level, const char *message) {
    struct heard *h = user;
    size_t n = strlen(h->text);
    snprintf(h->text + n, sizeof h->text - n, "%s: %s\n", level == MOEX_LOG_WARN ? "warn" : "note", message);
}

/* The model for the cpu device, with its pack file next to it unless no_pack. */
static moex_model *load(bool no_pack, struct heard *h) {
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = model_path;
    mp.n_threads = 1;
    mp.pin_threads = false;
    mp.device.device = "cpu";
    mp.device.no_pack = no_pack;
    mp.log = h ? on_log : NULL;
    mp.user = h;
    return moex_model_load(&mp);
}

/* Loads the model, makes a context and returns what the log heard. */
static void load_and_listen(struct heard *h) {
    h->text[0] = 0;
    h->loads = h->packs = 0;
    moex_model *m = load(false, h);
    CHECKF(m != NULL, "%s", moex_last_error());
    if (!m) return;
    moex_context *c = moex_context_new(m, NULL);
    CHECKF(c != NULL, "%s", moex_last_error());
    int32_t ids[3] = { 1, 2, 3 };
    CHECK(c && moex_eval(c, ids, 3) == 0);
    for (int phase = 0; c && phase < 2; phase++) {
        struct moex_phase_counters k;
        moex_context_phase_counters(c, (enum moex_phase)phase, &k);
        h->loads += k.loads;
        h->packs += k.packs;
    }
    moex_context_free(c);
    moex_model_free(m);
}

static bool used(const struct heard *h) {
    return !strstr(h->text, "pack file refused") && h->loads > 0 && h->packs == 0;
}

static bool refused_as_changed(const struct heard *h) {
    return strstr(h->text, "pack file refused") && strstr(h->text, "the model file changed since it was packed") &&
           strstr(h->text, "Rebuild it with: moex pack -m");
}

/* The sampled identity of the model file as it is now. */
static struct packfile_identity identity_now(void) {
    struct packfile_identity id = { 0 };
    struct gguf_file *f = gguf_open(model_path);
    CHECK(f != NULL);
    if (f) CHECK(packfile_model_identity(f, &id) == PACKFILE_OK);
    gguf_close(f);
    return id;
}

/* An offset in the middle of the largest tensor, between the 4 KiB samples
 * the identity hashes (the gaps of docs/pack-format.md's formula). */
static uint64_t unsampled_offset(void) {
    struct gguf_file *f = gguf_open(model_path);
    CHECK(f != NULL);
    if (!f) return 0;
    const struct gguf_tensor *big = NULL;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (!big || f->tensors[i].nbytes > big->nbytes) big = &f->tensors[i];
    uint64_t k = 4 + big->nbytes / (16ull << 20), at = 0;
    if (big->nbytes > k * 4096) {
        /* between sample 0 (ending at 4096) and sample 1 */
        uint64_t next = (big->nbytes - 4096) / (k - 1);
        if (next > 8192) at = (uint64_t)((const uint8_t *)big->data - f->map) + 4096 + (next - 4096) / 2;
    }
    gguf_close(f);
    return at;
}

static void write_byte_in_place(uint64_t at) {
    int fd = open(model_path, O_RDWR);
    CHECK(fd >= 0);
    if (fd < 0) return;
    uint8_t b = 0;
    CHECK(pread(fd, &b, 1, (off_t)at) == 1);
    b ^= 0x5a;
    CHECK(pwrite(fd, &b, 1, (off_t)at) == 1);
    close(fd);
}

static struct timespec mtime_of(const char *path) {
    struct stat st;
    memset(&st, 0, sizeof st);
    CHECK(stat(path, &st) == 0);
    return st.st_mtim;
}

static void set_mtime(const char *path, struct timespec t) {
    struct timespec times[2] = { t, t };
    CHECK(utimensat(AT_FDCWD, path, times, 0) == 0);
}

static void pack_now(void) {
    moex_model *m = load(true, NULL);
    CHECK(m != NULL);
    if (!m) return;
    struct moex_pack_result r;
    CHECKF(moex_pack(m, true, moex_file_create(pack_path), &r) == 0, "%s", moex_last_error());
    moex_model_free(m);
}

int main(void) {
    if (test_synth_file("tiny", NULL, "stale.gguf", model_path, sizeof model_path) != 0) return 1;
    CHECK(moex_pack_path_for(model_path, pack_path, sizeof pack_path) == 0);
    /* A time in the past, so that the edits below are surely later. */
    set_mtime(model_path, (struct timespec){ 1700000000, 123456789 });
    pack_now();
    struct heard h;
    load_and_listen(&h);
    CHECKF(used(&h), "%s (%llu loaded, %llu packed)", h.text, (unsigned long long)h.loads,
           (unsigned long long)h.packs);

    /* An in-place edit between the samples: the hash cannot see it, the
     * file's time does. */
    struct packfile_identity before = identity_now();
    uint64_t at = unsampled_offset();
    CHECKF(at > 0, "no tensor of the tiny model has a gap between its samples");
    struct timespec packed_time = mtime_of(model_path);
    write_byte_in_place(at);
    struct packfile_identity after = identity_now();
    CHECK(after.hash == before.hash && after.gguf_size == before.gguf_size && after.inode == before.inode);
    CHECK(after.mtime_ns != before.mtime_ns);
    load_and_listen(&h);
    CHECKF(refused_as_changed(&h) && h.loads == 0, "%s", h.text);

    /* Not detected, as documented: the same edit with the time set back. */
    set_mtime(model_path, packed_time);
    load_and_listen(&h);
    CHECKF(used(&h), "%s", h.text);

    /* Only the time changed (touch): refused too, then a rebuild holds. */
    set_mtime(model_path, (struct timespec){ 1800000000, 0 });
    load_and_listen(&h);
    CHECKF(refused_as_changed(&h) && h.loads == 0, "%s", h.text);
    pack_now();
    load_and_listen(&h);
    CHECKF(used(&h), "%s", h.text);

    /* The same bytes in a new file (a copy put in place): another inode. */
    char copy[4200];
    snprintf(copy, sizeof copy, "%s.copy", model_path);
    size_t size = 0;
    void *bytes = read_whole_file(model_path, &size);
    FILE *out = fopen(copy, "wb");
    CHECK(bytes && out && fwrite(bytes, 1, size, out) == size);
    if (out) fclose(out);
    free(bytes);
    set_mtime(copy, mtime_of(model_path));
    CHECK(rename(copy, model_path) == 0);
    load_and_listen(&h);
    CHECKF(refused_as_changed(&h) && strstr(h.text, "inode"), "%s", h.text);
    return test_finish();
}
