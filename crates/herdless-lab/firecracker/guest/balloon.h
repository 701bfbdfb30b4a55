#ifndef HERDLESS_LAB_BALLOON_H
#define HERDLESS_LAB_BALLOON_H

#include <stdint.h>

/*
 * The virtio-mmio balloon (balloon.c). balloon_init() finds the device
 * Firecracker announced on the command line and brings it up (no optional
 * feature: no statistics, no deflate on OOM); it fails the guest when there
 * is none. balloon_inflate() gives `pages` 4 KiB pages from guest-physical
 * page frame `first_pfn` on to the balloon (Firecracker discards them: they
 * read as zeros afterwards) and returns when the device has taken them.
 */
void balloon_init(const char *cmdline);
void balloon_inflate(uint64_t first_pfn, uint64_t pages);

#endif
