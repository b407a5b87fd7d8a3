/* The pack file's names for people (matrices, statuses) and the entry hash
 * that the reader and the writer share. */
#include "pack/packfile.h"

#include "core/xxh64.h"

const char *packfile_matrix_name(enum packfile_matrix m) {
    switch (m) {
    case PACKFILE_GATE: return "gate";
    case PACKFILE_UP: return "up";
    case PACKFILE_DOWN: return "down";
    default: return "?";
    }
}

const char *packfile_status_string(int status) {
    switch (status) {
    case PACKFILE_OK: return "ok";
    case PACKFILE_E_IO: return "cannot read or write the file";
    case PACKFILE_E_NOT_PACK: return "not a pack file";
    case PACKFILE_E_VERSION: return "another pack file version";
    case PACKFILE_E_LAYOUT: return "packed for another device layout";
    case PACKFILE_E_MODEL: return "packed from another model";
    case PACKFILE_E_CHECKSUM: return "bad checksum";
    case PACKFILE_E_TRUNCATED: return "truncated";
    case PACKFILE_E_CORRUPT: return "inconsistent fields";
    case PACKFILE_E_ARG: return "invalid argument";
    case PACKFILE_E_NOMEM: return "out of memory";
    default: return "unknown pack file status";
    }
}

uint64_t packfile_entry_hash(const int8_t *codes, size_t code_bytes, const float *scales, int N) {
    struct xxh64_state s;
    xxh64_init(&s, 0);
    xxh64_update(&s, codes, code_bytes);
    xxh64_update(&s, scales, (size_t)N * sizeof(float));
    return xxh64_digest(&s);
}
