/* The magic bytes that open moex's own files, in one place, so that a reader
 * of one format can name another it was handed by mistake without knowing
 * that format (the GGUF reader recognises a pack file). */
#ifndef MOEX_FILE_MAGIC_H
#define MOEX_FILE_MAGIC_H

#define MOEX_PACK_MAGIC "MOEXPACK"  /* a pack file (pack/packfile_format.h) */
#define MOEX_PACK_MAGIC_BYTES 8

#endif
