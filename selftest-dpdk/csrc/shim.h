/* Out-of-line wrappers for DPDK's static inline functions and macros, which have no symbol
 * that Rust could call. Everything here is a one-line forward; keep it that way. */
#ifndef DAQTUNE_DPDK_SHIM_H
#define DAQTUNE_DPDK_SHIM_H

#include <stdint.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_cycles.h>

uint16_t dqt_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t dqt_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
struct rte_mbuf *dqt_pktmbuf_alloc(struct rte_mempool *mp);
int dqt_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n);
void dqt_pktmbuf_free(struct rte_mbuf *m);
void *dqt_pktmbuf_mtod(struct rte_mbuf *m);
char *dqt_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
uint32_t dqt_pktmbuf_pkt_len(const struct rte_mbuf *m);
uint16_t dqt_pktmbuf_data_len(const struct rte_mbuf *m);
uint16_t dqt_pktmbuf_nb_segs(const struct rte_mbuf *m);
int dqt_errno(void);
uint64_t dqt_rdtsc(void);
unsigned int dqt_lcore_id(void);
void dqt_pause(void);

#endif
