// Content hashes for the store (no external dependency): SHA-256 as specified in FIPS 180-4.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace planner::store {

std::array<std::uint8_t, 32> sha256(std::string_view data);
// Lower-case hexadecimal SHA-256 of `data` (64 characters).
std::string sha256_hex(std::string_view data);

}  // namespace planner::store
