#pragma once
/** A file `doctor --fix` or the MTP splice changed or created (or, in a dry run, would): the unit of their reports. */
#include <string>
#include <vector>

namespace fp4forge {

/** A file doctor changed (or, in a dry run, would change). */
struct FileChange {
  std::string file;                ///< path relative to the checkpoint directory
  std::vector<std::string> kinds;  ///< the fixes that produced this change
  bool created = false;            ///< the file did not exist before
  std::string backup;              ///< backup file name (empty when created or not written)
  bool written = false;            ///< false in a dry run
  std::string diff;                ///< unified diff old -> new (empty for a binary file such as a shard)
};

}  // namespace fp4forge
