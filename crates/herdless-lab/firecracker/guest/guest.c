/*
 * The lab's Firecracker guest: a bare-metal x86-64 program (no Linux) that
 * fills a working set, says so on the serial console, and then reads the
 * whole working set again and again in timed passes. The `firecracker`
 * experiment snapshots it between two passes and restores it through each
 * page-fault handler: the first pass after the restore is the time a
 * restored VM takes to get its working set back.
 *
 * Why bare metal: on the lab's machine /dev/kvm is kvm-pvm, a nested
 * hypervisor that runs guest user mode (ring 3) natively but emulates every
 * guest kernel (ring 0) instruction, and a stock Linux guest kernel stops
 * there on an instruction the emulator lacks. This guest runs a handful of
 * ring-0 instructions (page tables, GDT) and everything else in ring 3.
 *
 * Boot: Firecracker loads this ELF at 1 MiB and enters _start (entry.S) in
 * 64-bit mode with %rsi at the Linux boot parameters. kernel_main() builds
 * page tables identity-mapping the first GiB with 2 MiB pages that ring 3
 * may use, a GDT with ring-3 segments, and drops to ring 3 with IOPL 3 (so
 * `out` to the serial port works there) and interrupts off. There is no IDT:
 * an exception stops the VM (triple fault), which the lab sees as a VM that
 * never prints.
 *
 * Kernel command line (boot_args), all optional, decimal:
 *   ws_mib=N       working set size in MiB (default 128)
 *   ws_base_mib=N  where it starts in guest-physical memory (default 64)
 *   gap_ms=N       busy-wait between two passes (default 100); a byte on
 *                  the serial input ends it at once (checked every ~1 ms)
 *   tsc_khz=N      TSC frequency, to turn gap_ms into TSC cycles (default
 *                  2000000); the times the guest prints are TSC cycles
 *   balloon_mib=N  with a virtio balloon (balloon.c): right after a restore
 *                  (below), give the last N MiB of the working set to the
 *                  balloon, then go on (default 0: never)
 *
 * Serial console (COM1) protocol, one line each:
 *   GUEST herdless-lab 2 ws_mib=<N> ws_base_mib=<N> balloon_mib=<N>   at start
 *   READY <checksum> <cycles>       working set filled (cycles of the fill)
 *   PASS <n> <checksum> <cycles> <tail cycles>
 *                                   pass n read the whole working set; of its
 *                                   cycles, <tail cycles> went to the last
 *                                   balloon_mib MiB (0 without a balloon)
 *   BALLOON <pages> <cycles>        that many 4 KiB pages were inflated
 *   ERROR <text>                    bad parameters; the guest then spins
 * The lab pauses the VM for its snapshot in a busy-wait and, after a
 * restore, sends a byte to the serial input: under KVM the guest's TSC goes
 * on from the snapshot's value, so the wait would otherwise run out its
 * remainder before the first pass (under kvm-pvm the TSC has moved on and
 * the pass starts at once anyway). That byte, or a wait that overslept by
 * more than a second (the TSC moved on while the VM was paused), tells the
 * guest it was restored: then the balloon inflates, while the page-fault
 * handler is still installing memory, and the next pass reads the
 * ballooned pages back.
 * <checksum> is 16 hex digits: FNV-1a (64-bit) over the working set's
 * 64-bit words in order, where word i holds splitmix64(i) | 1 (never zero:
 * a page that reads as zeros changes it), and 0 for a ballooned word. The
 * lab computes the same value.
 */
#include "console.h"
#include "balloon.h"


/* Offsets in the Linux boot parameters ("zero page"). */
#define BP_E820_ENTRIES 0x1e8
#define BP_CMD_LINE_PTR 0x228
#define BP_E820_TABLE 0x2d0
#define E820_RAM 1

/* Page-table entry bits. */
#define PTE_P 0x1ULL
#define PTE_RW 0x2ULL
#define PTE_US 0x4ULL
#define PTE_PWT 0x8ULL
#define PTE_PCD 0x10ULL
#define PTE_PS 0x80ULL
/* Firecracker's 32-bit MMIO window (virtio-mmio devices): 3..4 GiB. */
#define MMIO_PDPT_SLOT 3ULL

/* Selectors in gdt[] below. */
#define KERNEL_CS 0x08
#define KERNEL_DS 0x10
#define USER_DS (0x18 | 3)
#define USER_CS (0x20 | 3)

static uint64_t pml4[512] __attribute__((aligned(4096)));
static uint64_t pdpt[512] __attribute__((aligned(4096)));
static uint64_t pd[512] __attribute__((aligned(4096)));
static uint64_t pd_mmio[512] __attribute__((aligned(4096)));
static const uint64_t gdt[] __attribute__((aligned(16))) = {
    0,
    0x00af9a000000ffffULL, /* kernel code, 64-bit */
    0x00cf92000000ffffULL, /* kernel data */
    0x00cff2000000ffffULL, /* user data, DPL 3 */
    0x00affa000000ffffULL, /* user code, 64-bit, DPL 3 */
};
static uint8_t user_stack[65536] __attribute__((aligned(16)));

/* Boot parameters, read in ring 3 (the identity map lets it). */
static const uint8_t *boot_params;

static void user_main(void);

/* Ring 0: as few instructions as possible (each one is emulated). */
void kernel_main(const uint8_t *bp)
{
    boot_params = bp;
    for (uint64_t i = 0; i < 512; i++) {
        pd[i] = (i << 21) | PTE_P | PTE_RW | PTE_US | PTE_PS;
        pd_mmio[i] = ((MMIO_PDPT_SLOT << 30) + (i << 21)) | PTE_P | PTE_RW | PTE_US | PTE_PWT |
                     PTE_PCD | PTE_PS;
    }
    pdpt[0] = (uint64_t)pd | PTE_P | PTE_RW | PTE_US;
    pdpt[MMIO_PDPT_SLOT] = (uint64_t)pd_mmio | PTE_P | PTE_RW | PTE_US;
    pml4[0] = (uint64_t)pdpt | PTE_P | PTE_RW | PTE_US;

    struct __attribute__((packed)) {
        uint16_t limit;
        uint64_t base;
    } gdtr = {sizeof(gdt) - 1, (uint64_t)gdt};
    __asm__ volatile("lgdt %0" ::"m"(gdtr));
    __asm__ volatile("mov %0, %%cr3" ::"r"((uint64_t)pml4) : "memory");
    /* Reload CS (far return) and the data segments from our GDT. */
    __asm__ volatile("pushq %[cs]\n\t"
                     "leaq 1f(%%rip), %%rax\n\t"
                     "pushq %%rax\n\t"
                     "lretq\n"
                     "1:\n\t"
                     "movw %[ds], %%ax\n\t"
                     "movw %%ax, %%ds\n\t"
                     "movw %%ax, %%es\n\t"
                     "movw %%ax, %%ss\n\t"
                     :
                     : [cs] "i"(KERNEL_CS), [ds] "i"(KERNEL_DS)
                     : "rax", "memory");
    /* To ring 3: IOPL 3 (bits 12-13), reserved bit 1, IF clear. */
    const uint64_t rflags = 0x3002;
    __asm__ volatile("movw %[uds], %%ax\n\t"
                     "movw %%ax, %%ds\n\t"
                     "movw %%ax, %%es\n\t"
                     "pushq %[uds]\n\t"
                     "pushq %[sp]\n\t"
                     "pushq %[fl]\n\t"
                     "pushq %[ucs]\n\t"
                     "pushq %[ip]\n\t"
                     "iretq"
                     :
                     : [uds] "i"(USER_DS), [ucs] "i"(USER_CS),
                       [sp] "r"((uint64_t)(user_stack + sizeof(user_stack))),
                       [fl] "r"(rflags), [ip] "r"((uint64_t)user_main)
                     : "rax", "memory");
    for (;;)
        ;
}

/* ---- ring 3 from here on ---- */

/* Whether a byte came in on the serial port (line status: data ready); takes it. */
static int serial_input(void)
{
    if (!(inb(COM1 + 5) & 1))
        return 0;
    (void)inb(COM1);
    return 1;
}

/* Word i of the working set (never zero). */
static inline uint64_t pattern(uint64_t i)
{
    uint64_t z = 0x9e3779b97f4a7c15ULL * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (z ^ (z >> 31)) | 1;
}

/* FNV-1a over `words` words from `w`, going on from `h`. */
static uint64_t checksum(uint64_t h, const volatile uint64_t *w, uint64_t words)
{
    for (uint64_t i = 0; i < words; i++) {
        h ^= w[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

/* Whether [base, base + len) lies within one RAM entry of the e820 map. */
static int in_ram(uint64_t base, uint64_t len)
{
    uint8_t n = boot_params[BP_E820_ENTRIES];
    for (uint8_t i = 0; i < n && i < 128; i++) {
        const uint8_t *e = boot_params + BP_E820_TABLE + 20 * (uint64_t)i;
        uint64_t addr = *(const uint64_t *)e, size = *(const uint64_t *)(e + 8);
        uint32_t type = *(const uint32_t *)(e + 16);
        if (type == E820_RAM && base >= addr && base + len <= addr + size)
            return 1;
    }
    return 0;
}

static void user_main(void)
{
    const char *cmdline =
        (const char *)(uint64_t) * (const uint32_t *)(boot_params + BP_CMD_LINE_PTR);
    const uint64_t ws_mib = cmdline_u64(cmdline, "ws_mib", 128);
    const uint64_t base_mib = cmdline_u64(cmdline, "ws_base_mib", 64);
    const uint64_t gap_ms = cmdline_u64(cmdline, "gap_ms", 100);
    const uint64_t tsc_khz = cmdline_u64(cmdline, "tsc_khz", 2000000);
    const uint64_t balloon_mib = cmdline_u64(cmdline, "balloon_mib", 0);

    put_str("GUEST herdless-lab 2 ws_mib=");
    put_dec(ws_mib);
    put_str(" ws_base_mib=");
    put_dec(base_mib);
    put_str(" balloon_mib=");
    put_dec(balloon_mib);
    put_char('\n');
    /* The guest's own image and stacks live below 16 MiB; the page tables map 1 GiB. */
    if (ws_mib == 0 || base_mib < 16 || base_mib + ws_mib > 1024)
        fail("ws_mib/ws_base_mib outside 16 MiB..1 GiB");
    if (!in_ram(base_mib * MIB, ws_mib * MIB))
        fail("the working set is not in guest RAM (mem_size_mib too small?)");
    if (balloon_mib > ws_mib)
        fail("balloon_mib is larger than the working set");
    if (balloon_mib)
        balloon_init(cmdline);

    volatile uint64_t *ws = (volatile uint64_t *)(base_mib * MIB);
    const uint64_t words = ws_mib * MIB / 8;
    /* The ballooned tail: the last balloon_mib MiB, read (and timed) last. */
    const uint64_t head_words = words - balloon_mib * MIB / 8;
    uint64_t t0 = rdtsc();
    for (uint64_t i = 0; i < words; i++)
        ws[i] = pattern(i);
    uint64_t t1 = rdtsc();
    put_str("READY ");
    put_hex64(checksum(FNV_OFFSET, ws, words));
    put_char(' ');
    put_dec(t1 - t0);
    put_char('\n');

    const uint64_t gap = gap_ms * tsc_khz;
    int ballooned = 0;
    for (uint64_t n = 1;; n++) {
        /* The lab pauses the VM for its snapshot in this wait; after a
         * restore it sends a byte, and the next pass starts at once. */
        const uint64_t until = rdtsc() + gap;
        uint64_t now, next_poll = 0;
        int nudged = 0;
        while ((now = rdtsc()) < until) {
            /* Each port read exits to the VMM: poll once a millisecond. */
            if (now >= next_poll) {
                if ((nudged = serial_input()))
                    break;
                next_poll = now + tsc_khz;
            }
            __asm__ volatile("pause");
        }
        /* Restored: the lab's byte came, or (kvm-pvm) the TSC moved on by
         * more than a second while the VM was paused for its snapshot. */
        const int restored = nudged || rdtsc() - until > 1000 * tsc_khz;
        if (restored && balloon_mib && !ballooned) {
            uint64_t a = rdtsc();
            uint64_t pages = balloon_mib * MIB / 4096;
            balloon_inflate((base_mib * MIB) / 4096 + ws_mib * MIB / 4096 - pages, pages);
            uint64_t b = rdtsc();
            ballooned = 1;
            put_str("BALLOON ");
            put_dec(pages);
            put_char(' ');
            put_dec(b - a);
            put_char('\n');
        }
        uint64_t a = rdtsc();
        uint64_t sum = checksum(FNV_OFFSET, ws, head_words);
        uint64_t b = rdtsc();
        sum = checksum(sum, ws + head_words, words - head_words);
        uint64_t c = rdtsc();
        put_str("PASS ");
        put_dec(n);
        put_char(' ');
        put_hex64(sum);
        put_char(' ');
        put_dec(c - a);
        put_char(' ');
        put_dec(c - b);
        put_char('\n');
    }
}
