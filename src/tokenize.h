/*
 * tokenize.h — the full-text tokenizer (issue 19): UTF-8 text to folded
 * tokens with their positions. The rules are in tokenize.c's opening
 * comment; the public entry is mote_tokenize (mote.h).
 */
#ifndef MOTE_TOKENIZE_H
#define MOTE_TOKENIZE_H

#include <stddef.h>
#include <stdint.h>

#include "mote.h"

/* One code point's class (UNI_SEP, UNI_WORD, UNI_DIACRITIC, UNI_IDEO of
 * unicode_tab.h: 0, 1, 2, 3) and what it becomes in a token (`remove`:
 * with diacritics removed). For tests. */
int mote__uni_class(uint32_t cp);
uint32_t mote__uni_fold(uint32_t cp, int remove);
/* The Unicode version of the tables, e.g. "14.0.0". */
const char *mote__uni_version(void);

#endif
