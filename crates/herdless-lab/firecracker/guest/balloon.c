/*
 * A minimal virtio-balloon driver over virtio-mmio (virtio 1.x, split
 * virtqueues), polled from ring 3: the guest has no interrupts, and every
 * register access is an MMIO exit to Firecracker. It only inflates, once,
 * with the pages the guest names: enough for the lab to make Firecracker
 * discard part of a restored guest's memory (a UFFD_EVENT_REMOVE for a
 * page-fault handler) at a moment it chooses.
 *
 * Firecracker announces each virtio-mmio device on the kernel command line
 * as `virtio_mmio.device=4K@0x<base>:<irq>`; its MMIO window (3..4 GiB) is
 * mapped uncached for ring 3 by guest.c.
 */
#include "console.h"
#include "balloon.h"

/* virtio-mmio registers (byte offsets). */
#define VM_MAGIC 0x000
#define VM_VERSION 0x004
#define VM_DEVICE_ID 0x008
#define VM_DEVICE_FEATURES 0x010
#define VM_DEVICE_FEATURES_SEL 0x014
#define VM_DRIVER_FEATURES 0x020
#define VM_DRIVER_FEATURES_SEL 0x024
#define VM_QUEUE_SEL 0x030
#define VM_QUEUE_NUM_MAX 0x034
#define VM_QUEUE_NUM 0x038
#define VM_QUEUE_READY 0x044
#define VM_QUEUE_NOTIFY 0x050
#define VM_STATUS 0x070
#define VM_QUEUE_DESC 0x080
#define VM_QUEUE_DRIVER 0x090
#define VM_QUEUE_DEVICE 0x0a0
#define VM_CONFIG 0x100
/* virtio_balloon_config: num_pages (the host's target), actual. */
#define BALLOON_ACTUAL (VM_CONFIG + 4)

#define STATUS_ACKNOWLEDGE 1
#define STATUS_DRIVER 2
#define STATUS_DRIVER_OK 4
#define STATUS_FEATURES_OK 8
#define VIRTIO_MAGIC 0x74726976 /* "virt" */
#define BALLOON_DEVICE_ID 5
#define INFLATE_QUEUE 0
#define DEFLATE_QUEUE 1

/* Descriptors per queue, and page frame numbers per descriptor. */
#define QUEUE_SIZE 8
#define PFNS_PER_DESC 256

struct desc {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
};

struct avail {
    uint16_t flags;
    uint16_t idx;
    uint16_t ring[QUEUE_SIZE];
};

struct used {
    uint16_t flags;
    uint16_t idx;
    struct {
        uint32_t id;
        uint32_t len;
    } ring[QUEUE_SIZE];
};

/* Both queues' rings (the deflate queue is set up, never used). */
static struct {
    struct desc desc[QUEUE_SIZE] __attribute__((aligned(16)));
    struct avail avail __attribute__((aligned(2)));
    struct used used __attribute__((aligned(4)));
} queues[2] __attribute__((aligned(4096)));
static uint32_t pfns[QUEUE_SIZE][PFNS_PER_DESC] __attribute__((aligned(4096)));

static volatile uint32_t *regs;
static uint64_t inflated;

static uint32_t rd(uint32_t off) { return regs[off / 4]; }
static void wr(uint32_t off, uint32_t v) { regs[off / 4] = v; }

void balloon_init(const char *cmdline)
{
    regs = (volatile uint32_t *)cmdline_hex(cmdline, "virtio_mmio.device=4K@");
    if (!regs)
        fail("balloon: no virtio_mmio.device on the command line");
    if (rd(VM_MAGIC) != VIRTIO_MAGIC || rd(VM_VERSION) != 2 || rd(VM_DEVICE_ID) != BALLOON_DEVICE_ID)
        fail("balloon: the virtio-mmio device is not a virtio 1.x balloon");
    wr(VM_STATUS, 0);
    wr(VM_STATUS, STATUS_ACKNOWLEDGE);
    wr(VM_STATUS, STATUS_ACKNOWLEDGE | STATUS_DRIVER);
    /* Features: VIRTIO_F_VERSION_1 (bit 32) and nothing else. */
    wr(VM_DEVICE_FEATURES_SEL, 1);
    if (!(rd(VM_DEVICE_FEATURES) & 1))
        fail("balloon: the device does not offer VIRTIO_F_VERSION_1");
    wr(VM_DRIVER_FEATURES_SEL, 0);
    wr(VM_DRIVER_FEATURES, 0);
    wr(VM_DRIVER_FEATURES_SEL, 1);
    wr(VM_DRIVER_FEATURES, 1);
    wr(VM_STATUS, STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK);
    if (!(rd(VM_STATUS) & STATUS_FEATURES_OK))
        fail("balloon: the device refused the features");
    for (uint32_t q = INFLATE_QUEUE; q <= DEFLATE_QUEUE; q++) {
        wr(VM_QUEUE_SEL, q);
        if (rd(VM_QUEUE_NUM_MAX) < QUEUE_SIZE)
            fail("balloon: queue too small");
        wr(VM_QUEUE_NUM, QUEUE_SIZE);
        wr(VM_QUEUE_DESC, (uint32_t)(uint64_t)queues[q].desc);
        wr(VM_QUEUE_DESC + 4, 0);
        wr(VM_QUEUE_DRIVER, (uint32_t)(uint64_t)&queues[q].avail);
        wr(VM_QUEUE_DRIVER + 4, 0);
        wr(VM_QUEUE_DEVICE, (uint32_t)(uint64_t)&queues[q].used);
        wr(VM_QUEUE_DEVICE + 4, 0);
        wr(VM_QUEUE_READY, 1);
    }
    wr(VM_STATUS, STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK);
}

void balloon_inflate(uint64_t first_pfn, uint64_t pages)
{
    volatile struct avail *avail = &queues[INFLATE_QUEUE].avail;
    volatile struct used *used = &queues[INFLATE_QUEUE].used;
    uint64_t done = 0;
    while (done < pages) {
        /* Up to QUEUE_SIZE descriptors of PFNS_PER_DESC frames each, then
         * wait until the device has used them all. */
        const uint16_t idx = avail->idx;
        uint16_t d = 0;
        for (; d < QUEUE_SIZE && done < pages; d++) {
            uint64_t n = pages - done < PFNS_PER_DESC ? pages - done : PFNS_PER_DESC;
            for (uint64_t i = 0; i < n; i++)
                pfns[d][i] = (uint32_t)(first_pfn + done + i);
            queues[INFLATE_QUEUE].desc[d] =
                (struct desc){(uint64_t)pfns[d], (uint32_t)(n * 4), 0, 0};
            avail->ring[(uint16_t)(idx + d) % QUEUE_SIZE] = d;
            done += n;
        }
        /* The descriptors and ring entries before the index that publishes
         * them: x86 does not reorder stores with stores; the compiler is
         * told not to. */
        __asm__ volatile("" ::: "memory");
        avail->idx = (uint16_t)(idx + d);
        wr(VM_QUEUE_NOTIFY, INFLATE_QUEUE);
        while (used->idx != (uint16_t)(idx + d))
            __asm__ volatile("pause");
    }
    inflated += pages;
    wr(BALLOON_ACTUAL, (uint32_t)inflated);
}
