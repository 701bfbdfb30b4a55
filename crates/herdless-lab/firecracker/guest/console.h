/*
 * What the guest's parts share: port and TSC access, the serial console
 * (COM1) and the kernel command line (console.c). All of it runs in
 * ring 3 (guest.c explains why and how).
 */
#ifndef HERDLESS_LAB_CONSOLE_H
#define HERDLESS_LAB_CONSOLE_H

#include <stdint.h>

#define MIB (1ULL << 20)
#define COM1 0x3f8

static inline void outb(uint16_t port, uint8_t v)
{
    __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

/* Serial console output. */
void put_char(char c);
void put_str(const char *s);
void put_hex64(uint64_t v);
void put_dec(uint64_t v);
/* Prints `ERROR <why>` and spins forever. */
__attribute__((noreturn)) void fail(const char *why);

/* The value of `key=<decimal>` on the command line, or `fallback`. */
uint64_t cmdline_u64(const char *cmdline, const char *key, uint64_t fallback);
/* The value of `key=0x<hex>` on the command line, or 0. */
uint64_t cmdline_hex(const char *cmdline, const char *key);

#endif
