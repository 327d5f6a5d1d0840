// CPU emulation of selftest/src/gpu_sink/verify.cu's phases (compiled with -DHOST_EMU), run by
// scripts/gen-gpu-ptx.sh before it regenerates the PTX: the kernel's arithmetic must accept
// well-formed messages of every length class and reject each planted defect.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../selftest/src/gpu_sink/verify.cu"

static u32 crc_raw(u32 reg, const u8 *p, size_t n, const u32 *tab) {
    for (size_t i = 0; i < n; i++) reg = tab[(reg ^ p[i]) & 0xff] ^ (reg >> 8);
    return reg;
}

static void make_shift(u32 (*out)[256], size_t n, const u32 *tab) {
    u32 cols[32];
    u8 *zeros = calloc(n + 1, 1);
    for (int i = 0; i < 32; i++) cols[i] = crc_raw(1u << i, zeros, n, tab);
    free(zeros);
    for (int t = 0; t < 4; t++)
        for (int v = 0; v < 256; v++) {
            u32 acc = 0;
            for (int b = 0; b < 8; b++) if (v & (1 << b)) acc ^= cols[t * 8 + b];
            out[t][v] = acc;
        }
}

static u32 verify(u8 *msg, u32 len, struct Tables *t) {
    u32 body = len - 32, chunk = body / LANES, parts[LANES];
    make_shift(t->shift_chunk, chunk, t->crc);
    make_shift(t->shift_last, body - (LANES - 1) * chunk, t->crc);
    make_shift(t->shift_body, body, t->crc);
    for (u32 l = 0; l < LANES; l++) parts[l] = lane_slice(msg, len, chunk, l, t->crc);
    return finish(msg, len, parts, t, t->crc);
}

int main(void) {
    static struct Tables t;
    for (u32 i = 0; i < 256; i++) {
        u32 c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0);
        t.crc[i] = c;
    }
    // Known answer: CRC-32C("123456789") = 0xE3069283.
    if (~crc_raw(~0u, (const u8 *)"123456789", 9, t.crc) != 0xE3069283u) return 1;
    u32 lens[] = {32, 33, 63, 64, 65, 100, 1000, 4096, 8192, 8193, 9000};
    int bad = 0;
    srand(7);
    for (unsigned k = 0; k < sizeof lens / sizeof *lens; k++) {
        u32 len = lens[k];
        u8 *m = malloc(len);
        for (u32 i = 0; i < len; i++) m[i] = rand();
        u32 mg = MAGIC;
        memcpy(m, &mg, 4);
        memcpy(m + 4, &len, 4);
        u32 c = crc_raw(~0u, m, 28, t.crc);
        c = ~crc_raw(c, m + 32, len - 32, t.crc);
        memcpy(m + 28, &c, 4);
        if (verify(m, len, &t) != ST_OK) { printf("len %u: good message rejected\n", len); bad++; }
        for (u32 pos = 8; pos < len; pos += (len > 200 ? 97 : 1)) {
            if (pos >= 28 && pos < 32) continue;
            m[pos] ^= 0x10;
            if (verify(m, len, &t) != ST_CRC) { printf("len %u: flip at %u missed\n", len, pos); bad++; }
            m[pos] ^= 0x10;
        }
        m[0] ^= 1;
        if (verify(m, len, &t) != ST_MAGIC) bad++;
        m[0] ^= 1;
        m[4] ^= 1;
        if (verify(m, len, &t) != ST_LEN) bad++;
        free(m);
    }
    printf(bad ? "FAILED: %d\n" : "emulation ok\n", bad);
    return bad != 0;
}
