/* test_gpu_slots.c — hpt_gpu_shared / hpt_gpu_shared_describe (lib/gpu_slots.c)
 * on synthetic (host, GPU) tables: the check hpt-train runs over every
 * rank's gathered pair before NCCL is initialised. Prints one line per
 * failed check; exit 1 if any. */
#include <stdio.h>
#include <string.h>

#include "gpu_slots.h"

static int failures;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

static int same(const int *a, const int *b, int n)
{
    return !memcmp(a, b, (size_t)n * sizeof *a);
}

int main(void)
{
    int first[8];
    char msg[512];
    /* two nodes of two GPUs, one rank each: distinct (the same bus id on
     * another host is another GPU) */
    hpt_gpu_slot ok4[] = {{"n1", "0000:3b:00.0"}, {"n1", "0000:5e:00.0"},
                          {"n2", "0000:3b:00.0"}, {"n2", "0000:5e:00.0"}};
    int none[4] = {-1, -1, -1, -1};
    check(hpt_gpu_shared(ok4, 4, first) == 0 && same(first, none, 4),
          "one rank per GPU on two nodes: none shared");
    check(!strcmp(hpt_gpu_shared_describe(ok4, 4, first, 4, msg, sizeof msg), ""),
          "  described as an empty line");
    /* 4 ranks on one node with two GPUs (node-local rank mod 2) */
    hpt_gpu_slot mod2[] = {{"n1", "A"}, {"n1", "B"}, {"n1", "A"}, {"n1", "B"}};
    int want_mod2[4] = {-1, -1, 0, 1};
    check(hpt_gpu_shared(mod2, 4, first) == 2 && same(first, want_mod2, 4),
          "4 ranks on 2 GPUs: ranks 2 and 3 share with 0 and 1");
    hpt_gpu_shared_describe(mod2, 4, first, 4, msg, sizeof msg);
    check(!strcmp(msg, "rank 2 on n1 shares GPU A with rank 0; rank 3 on n1 shares GPU B with rank 1"),
          "  message names rank, host, GPU and the other rank");
    printf("     %s\n", msg);
    /* unsorted input, three on one GPU: every later rank points at the lowest */
    hpt_gpu_slot three[] = {{"n2", "X"}, {"n1", "X"}, {"n2", "X"}, {"n2", "Y"}, {"n2", "X"}};
    int want_three[5] = {-1, -1, 0, -1, 0};
    check(hpt_gpu_shared(three, 5, first) == 2 && same(first, want_three, 5),
          "three ranks on one GPU of n2, one X on n1: 2 and 4 share with 0");
    hpt_gpu_shared_describe(three, 5, first, 1, msg, sizeof msg);
    check(!strcmp(msg, "rank 2 on n2 shares GPU X with rank 0 (and 1 more rank)"),
          "  at most max_listed ranks, then a count");
    /* ranks without a GPU are never 'shared' */
    hpt_gpu_slot nogpu[] = {{"n1", ""}, {"n1", ""}, {"n1", "A"}};
    check(hpt_gpu_shared(nogpu, 3, first) == 0, "ranks with no GPU do not share one");
    /* one rank, zero ranks */
    check(hpt_gpu_shared(ok4, 1, first) == 0 && first[0] == -1, "one rank");
    check(hpt_gpu_shared(ok4, 0, first) == 0, "no rank");
    /* truncation keeps a terminated string */
    char small[16];
    hpt_gpu_shared(mod2, 4, first);
    hpt_gpu_shared_describe(mod2, 4, first, 4, small, sizeof small);
    check(strlen(small) == sizeof small - 1 && !strncmp(small, "rank 2 on n1 sh", 15),
          "a short buffer is filled and terminated");
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
