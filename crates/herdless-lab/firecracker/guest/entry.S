/*
 * Entry of the lab's bare-metal Firecracker guest (see guest.c).
 *
 * Firecracker's ELF loader starts the vCPU here in 64-bit long mode, at
 * CPL 0, interrupts off, with its own identity page tables for the first
 * GiB and %rsi pointing at the Linux boot parameters ("zero page"). We
 * switch to our own stack and hand the boot parameters to kernel_main(),
 * which never returns.
 */
    .section .text.entry, "ax"
    .globl _start
    .type _start, @function
_start:
    cli
    lea     kernel_stack_top(%rip), %rsp
    xor     %ebp, %ebp
    mov     %rsi, %rdi
    call    kernel_main
1:  hlt
    jmp     1b

    .section .bss
    .balign 16
    .skip   16384
kernel_stack_top:

    .section .note.GNU-stack, "", @progbits
