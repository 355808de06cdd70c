/*
 * stem.h — English stemming of full-text tokens (MOTE_TOKEN_STEM): the
 * Porter algorithm; the rules are in stem.c's opening comment.
 */
#ifndef MOTE_STEM_H
#define MOTE_STEM_H

#include <stddef.h>

/* Stem the folded token w[0..n) in place; returns its new length (at most
 * n). Tokens shorter than 3 bytes or longer than 64 come back unchanged. */
size_t mote__stem_en(char *w, size_t n);

#endif
