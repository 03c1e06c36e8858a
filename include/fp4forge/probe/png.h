#pragma once
/**
 * A tiny PNG encoder for the `vision` check: 8-bit RGB, no filtering, zlib "stored" (uncompressed)
 * deflate blocks, CRC-32 per chunk and Adler-32 over the raw scanlines. No libpng, no compression:
 * the images are small and the format stays trivially verifiable.
 *
 * Layout: signature (8 bytes) | IHDR (13) | IDAT (zlib: 0x78 0x01, stored blocks of <= 65535 bytes,
 * Adler-32 big-endian) | IEND. Each scanline is a filter byte 0 followed by width*3 RGB bytes.
 */
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4forge::probe {

/** CRC-32 (ISO-HDLC, as PNG uses) of `data`, continuing from `crc` (0 to start). */
std::uint32_t crc32(std::span<const std::uint8_t> data, std::uint32_t crc = 0) noexcept;
/** Adler-32 (zlib) of `data`, continuing from `adler` (1 to start). */
std::uint32_t adler32(std::span<const std::uint8_t> data, std::uint32_t adler = 1) noexcept;

/** Encodes width x height RGB pixels (row-major, 3 bytes each) as a PNG file. */
std::vector<std::uint8_t> encode_png_rgb(std::uint32_t width, std::uint32_t height,
                                         std::span<const std::uint8_t> rgb);

/** A `size` x `size` image: a filled red (255,0,0) circle of radius ~size*0.35 on white. */
std::vector<std::uint8_t> red_circle_png(std::uint32_t size = 64);

/** Standard base64 (with '=' padding). */
std::string base64_encode(std::span<const std::uint8_t> data);

/** "data:image/png;base64,..." for PNG bytes. */
std::string png_data_url(std::span<const std::uint8_t> png);

}  // namespace fp4forge::probe
