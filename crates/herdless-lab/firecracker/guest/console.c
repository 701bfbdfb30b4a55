/*
 * The guest's serial console (COM1) output and its kernel command line:
 * what guest.c and balloon.c both use (console.h declares it). Ring 3.
 */
#include "console.h"

void put_char(char c) { outb(COM1, (uint8_t)c); }

void put_str(const char *s)
{
    while (*s)
        put_char(*s++);
}

void put_hex64(uint64_t v)
{
    for (int shift = 60; shift >= 0; shift -= 4)
        put_char("0123456789abcdef"[(v >> shift) & 0xf]);
}

void put_dec(uint64_t v)
{
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        put_char(digits[--n]);
}

/* Where the value of `key` starts on the command line (`key` at the start
 * of a word, with its own separator), or 0. */
static const char *cmdline_value(const char *cmdline, const char *key)
{
    for (const char *p = cmdline; *p; p++) {
        if (p != cmdline && p[-1] != ' ')
            continue;
        const char *k = key, *q = p;
        while (*k && *q == *k)
            k++, q++;
        if (!*k)
            return q;
    }
    return 0;
}

uint64_t cmdline_u64(const char *cmdline, const char *key, uint64_t fallback)
{
    const char *q = cmdline_value(cmdline, key);
    if (!q || *q++ != '=' || *q < '0' || *q > '9')
        return fallback;
    uint64_t v = 0;
    while (*q >= '0' && *q <= '9')
        v = v * 10 + (uint64_t)(*q++ - '0');
    return v;
}

uint64_t cmdline_hex(const char *cmdline, const char *key)
{
    const char *q = cmdline_value(cmdline, key);
    if (!q || q[0] != '0' || q[1] != 'x')
        return 0;
    uint64_t v = 0;
    for (q += 2;; q++) {
        int d = *q >= '0' && *q <= '9'   ? *q - '0'
                : *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
                : *q >= 'A' && *q <= 'F' ? *q - 'A' + 10
                                         : -1;
        if (d < 0)
            return v;
        v = v * 16 + (uint64_t)d;
    }
}

void fail(const char *why)
{
    put_str("ERROR ");
    put_str(why);
    put_char('\n');
    for (;;)
        __asm__ volatile("pause");
}
