/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package textsafe makes text from cluster objects safe to print on a
// terminal. An attribute, a name or a message read from the API server is
// whatever its writer chose: a carriage return or a newline in it forges
// a row of a table, a tab shifts its columns, an escape sequence
// repaints the screen and a right-to-left override reorders what follows.
// Line and Text escape every rune that is not printable, the way
// strconv.Quote writes it (\r, \n, \t, \x1b, \u202e; an invalid byte as
// \xff), and leave printable text, Unicode included, as it is. A
// backslash is not escaped: what looks like an escape in the output may
// have been written that way, but no value can move the cursor.
//
// It imports nothing but the standard library, so any layer may use it.
package textsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line returns s with every rune that is not printable escaped, newlines
// included: the result is one line.
func Line(s string) string {
	return escape(s, false)
}

// Text returns s with every rune that is not printable escaped, except
// the newlines that separate its lines.
func Text(s string) string {
	return escape(s, true)
}

func escape(s string, keepNewlines bool) string {
	if safe(s, keepNewlines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case printable(r) || (keepNewlines && r == '\n'):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// safe reports whether s needs no escaping: the common case, which costs
// no allocation.
func safe(s string, keepNewlines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return safeRunes(s[i:], keepNewlines)
		}
		if (c < 0x20 || c == 0x7f) && !(keepNewlines && c == '\n') {
			return false
		}
	}
	return true
}

func safeRunes(s string, keepNewlines bool) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
		if !printable(r) && !(keepNewlines && r == '\n') {
			return false
		}
	}
	return true
}

// printable is unicode.IsPrint: letters, marks, numbers, punctuation,
// symbols and the ASCII space. Control and format characters (the
// bidirectional overrides, zero-width spaces) and every other space are
// not.
func printable(r rune) bool {
	return unicode.IsPrint(r)
}
