#pragma once
/**
 * Where two byte ranges first differ: the one byte comparison of verify's kept tensors and diff's values.
 *
 * first_difference(a, b, pool) is the offset of the first byte where `a` and `b` differ, the shorter size
 * when one is a prefix of the other, or nullopt when they are equal. With a pool of more than one worker,
 * ranges of a few MiB are compared as its tasks (a cold memory-mapped tensor is then read by several threads
 * at once); the answer is the same for any pool. Call it from outside the pool's workers.
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace fp4forge {

class ThreadPool;

std::optional<std::uint64_t> first_difference(std::span<const std::byte> a, std::span<const std::byte> b,
                                              ThreadPool* pool = nullptr);

}  // namespace fp4forge
