/*
 * checksum.h — CRC32C (Castagnoli) for page pointers and a 64-bit hash for
 * root slots. CRC32C uses the SSE4.2 instruction when the CPU has it and a
 * table otherwise; both give identical results.
 */
#ifndef MOTE_CHECKSUM_H
#define MOTE_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

uint32_t mote__crc32c(uint32_t crc, const void *buf, size_t n);
/* The table implementation alone (tests compare the two). */
uint32_t mote__crc32c_table(uint32_t crc, const void *buf, size_t n);
/* 64-bit keyed hash of a buffer (not cryptographic); n need not be a
 * multiple of 8. */
uint64_t mote__hash64(const void *buf, size_t n, uint64_t seed);

#endif
