// GPU verifier of daqtune self-test payloads (format: docs/selftest.md).
//
// Source of verify.ptx. Built without the CUDA toolkit by clang's NVPTX back end
// (scripts/gen-gpu-ptx.sh); daqtune embeds the PTX text and the driver JIT-compiles it, so
// neither building nor running daqtune needs nvcc. Only clang builtins are used (no CUDA
// headers). `-DHOST_EMU` compiles the same phases for the CPU (scripts/gen-gpu-ptx.sh runs that
// emulation as a check before writing the PTX).
//
// One warp per message, four messages per 128-thread block. The CRC-32C (Castagnoli, reflected,
// the same as payload::check) covers header bytes 0..28 and body bytes 32..len. Each lane takes
// a contiguous slice of the body and computes the raw register of its slice from zero; lane 0
// then folds the 32 partial registers with "advance over n zero bytes" operators that the host
// precomputes for the slice lengths (CRC is affine over GF(2): raw(0, A||B) =
// shift_|B|(raw(0, A)) ^ raw(0, B)), and joins the header the way payload::Generator does.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned char u8;

#define MAGIC 0x53545144u
#define LANES 32
#define WARPS_PER_BLOCK 4

// Laid out by the host (gpu_sink::Tables, the same order).
struct Tables {
    u32 crc[256];           // byte-wise CRC-32C table
    u32 shift_chunk[4][256]; // advance over `chunk` zero bytes (lanes 0..30)
    u32 shift_last[4][256];  // advance over the last lane's slice
    u32 shift_body[4][256];  // advance over the whole body (joins the header)
};

// Aggregates, updated with atomics (gpu_sink::Totals, the same order).
struct Totals {
    u64 ok;
    u64 bad_magic;
    u64 bad_len;
    u64 bad_crc;
    u64 bytes_ok;
    u64 min_seq;       // host initialises to ~0
    u64 max_seq;       // host initialises to 0
    u64 seq_breaks;    // good messages whose seq is not the previous message's + 1
};

// Per-message status codes (gpu_sink::MsgStatus).
#define ST_OK 0u
#define ST_MAGIC 1u
#define ST_LEN 2u
#define ST_CRC 3u

#ifdef HOST_EMU
#define DEV static
#else
#define DEV static __attribute__((device)) __attribute__((always_inline))
#endif

DEV u32 ld_u32(const u8 *p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

DEV u64 ld_u64(const u8 *p) { return (u64)ld_u32(p) | ((u64)ld_u32(p + 4) << 32); }

DEV u32 apply_shift(const u32 (*t)[256], u32 reg) {
    return t[0][reg & 0xff] ^ t[1][(reg >> 8) & 0xff] ^ t[2][(reg >> 16) & 0xff] ^ t[3][reg >> 24];
}

// Phase 1 (every lane): the raw register of this lane's body slice, from zero.
DEV u32 lane_slice(const u8 *msg, u32 msg_len, u32 chunk, u32 lane, const u32 *table) {
    u32 body = msg_len - 32;
    u32 start = lane * chunk;
    u32 end = lane == LANES - 1 ? body : start + chunk;
    const u8 *p = msg + 32;
    u32 reg = 0;
    for (u32 j = start; j < end; j++)
        reg = table[(reg ^ p[j]) & 0xff] ^ (reg >> 8);
    return reg;
}

// Phase 2 (lane 0): fold the slices, join the header, compare. Returns the status code.
DEV u32 finish(const u8 *msg, u32 msg_len, const u32 *parts, const struct Tables *t,
               const u32 *table) {
    if (ld_u32(msg) != MAGIC)
        return ST_MAGIC;
    if (ld_u32(msg + 4) != msg_len)
        return ST_LEN;
    u32 acc = parts[0];
    for (u32 i = 1; i < LANES - 1; i++)
        acc = apply_shift(t->shift_chunk, acc) ^ parts[i];
    acc = apply_shift(t->shift_last, acc) ^ parts[LANES - 1];
    u32 head = 0xffffffffu;
    for (u32 j = 0; j < 28; j++)
        head = table[(head ^ msg[j]) & 0xff] ^ (head >> 8);
    // `head` is the raw register after the header from ~0; advance it over the body.
    u32 crc = ~(apply_shift(t->shift_body, head) ^ acc);
    return crc == ld_u32(msg + 28) ? ST_OK : ST_CRC;
}

#ifndef HOST_EMU

#define TID __nvvm_read_ptx_sreg_tid_x()
#define BID __nvvm_read_ptx_sreg_ctaid_x()

// batch: n_msgs messages of msg_len bytes back to back (device memory or mapped pinned host
// memory). expect_first: the sequence number the host expects for message 0 (the last batch's
// last + 1), so breaks across batches count too. seqs/status: one entry per message.
extern "C" __attribute__((global)) void daqtune_verify(
    const u8 *batch, u32 msg_len, u32 n_msgs, u32 chunk, u64 expect_first,
    const struct Tables *t, u64 *seqs, u32 *status, struct Totals *tot) {
    __attribute__((shared)) u32 table[256];
    __attribute__((shared)) u32 parts[WARPS_PER_BLOCK][LANES];
    u32 tid = TID;
    for (u32 i = tid; i < 256; i += LANES * WARPS_PER_BLOCK)
        table[i] = t->crc[i];
    __syncthreads();
    u32 warp = tid / LANES;
    u32 lane = tid % LANES;
    u32 m = BID * WARPS_PER_BLOCK + warp;
    const u8 *msg = batch + (u64)m * msg_len;
    if (m < n_msgs)
        parts[warp][lane] = lane_slice(msg, msg_len, chunk, lane, table);
    __syncthreads();
    if (m >= n_msgs || lane != 0)
        return;
    u32 st = finish(msg, msg_len, parts[warp], t, table);
    u64 seq = ld_u64(msg + 8);
    seqs[m] = seq;
    status[m] = st;
    if (st == ST_OK) {
        __nvvm_atom_add_gen_ll((long long *)&tot->ok, 1);
        __nvvm_atom_add_gen_ll((long long *)&tot->bytes_ok, msg_len);
        __nvvm_atom_min_gen_ull(&tot->min_seq, seq);
        __nvvm_atom_max_gen_ull(&tot->max_seq, seq);
        u64 prev = m == 0 ? expect_first - 1 : ld_u64(msg - msg_len + 8);
        if (seq != prev + 1)
            __nvvm_atom_add_gen_ll((long long *)&tot->seq_breaks, 1);
    } else if (st == ST_MAGIC) {
        __nvvm_atom_add_gen_ll((long long *)&tot->bad_magic, 1);
    } else if (st == ST_LEN) {
        __nvvm_atom_add_gen_ll((long long *)&tot->bad_len, 1);
    } else {
        __nvvm_atom_add_gen_ll((long long *)&tot->bad_crc, 1);
    }
}

#endif
