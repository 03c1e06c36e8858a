#pragma once
/**
 * A JSON editor that preserves the file it edits: `doctor --fix` changes a key or two in files written
 * by Python's `json.dump`, the Rust `tokenizers` library or by hand, and the rest of the file must stay
 * byte-for-byte as it was (key order, indentation, separators, number spelling such as `1e-06`, string
 * escapes, trailing newline).
 *
 * Design: a lazily expanded concrete syntax tree over the source text. parse() validates the whole text
 * (strict RFC 8259) but builds nodes only for the containers an edit or lookup walks into; every other
 * value is kept as its source span and re-emitted verbatim. An unmodified document therefore dumps to
 * exactly its input. A modified container keeps the original whitespace around its surviving members;
 * new members and new values are written in the file's detected Style (indent unit, item and key
 * separators, ensure_ascii escaping), at the indentation of their siblings. New keys go at their sorted
 * position when the object's keys are sorted (as `json.dump(..., sort_keys=True)` writes them, e.g.
 * transformers configs), otherwise at the end.
 *
 * **Example**:
 *   auto doc = JsonDocument::parse(text, "config.json").value();
 *   doc.set({"text_config", "global_head_dim"}, 512);   // inserted between its sorted neighbours
 *   doc.erase({"text_config", "per_layer_config"});
 *   std::string out = doc.dump();                       // only those lines differ from `text`
 */
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"

namespace fp4forge {

/** How a JSON file is formatted, as detected from its text. */
struct JsonStyle {
  std::string indent;            ///< one indentation unit ("  ", "    ", "\t", " "); empty: single line
  std::string item_sep = ",";    ///< between items when single-line (", " for Python's json.dumps)
  std::string key_sep = ": ";    ///< between a key and its value
  bool ensure_ascii = true;      ///< non-ASCII written as \uXXXX (Python's default) vs raw UTF-8
  bool upper_hex = false;        ///< \uXXXX escapes use upper-case hex digits
  bool trailing_newline = false; ///< the file ends with "\n"
  bool multiline() const noexcept { return !indent.empty(); }
};

/** Detects the style of a JSON text (no validation; see JsonDocument::parse). */
JsonStyle detect_json_style(std::string_view text);

/** Encodes `s` (UTF-8) as a JSON string literal, quotes included, the way Python's json module does
 * with the given ensure_ascii setting (\", \\, \n, \r, \t, \b, \f, other controls as \u00XX). */
std::string encode_json_string(std::string_view s, bool ensure_ascii, bool upper_hex = false);

/** Serializes a value in `style`, its first line at the current position and nested lines indented
 * from `base_indent` (the indentation of the line the value starts on). */
std::string dump_json_styled(const nlohmann::ordered_json& v, const JsonStyle& style,
                             const std::string& base_indent = {});

class JsonDocument {
 public:
  using Path = std::vector<std::string>;  ///< object keys from the root (array items: decimal index)

  /** Validates `text` (BAD_INPUT with line:column on a syntax error) and keeps it as the source. */
  static Result<JsonDocument> parse(std::string text, std::string_view source);

  JsonDocument(JsonDocument&&) noexcept;
  JsonDocument& operator=(JsonDocument&&) noexcept;
  ~JsonDocument();

  const JsonStyle& style() const noexcept { return style_; }
  const std::string& source_text() const noexcept { return text_; }
  /** True after any successful set() / erase(). */
  bool modified() const noexcept { return modified_; }

  /** Whether `path` exists. */
  bool has(const Path& path) const;
  /** The value at `path` (parsed from its span only, so cheap on large files); nullopt if absent. */
  std::optional<nlohmann::ordered_json> get(const Path& path) const;
  /** The source text of the value at `path` (its current serialization if it was edited). */
  std::optional<std::string> raw(const Path& path) const;

  /**
   * Sets the value at `path`: replaces an existing value (keeping the key and the whitespace around
   * it), or inserts a new member into the existing parent object. BAD_INPUT when the parent is absent
   * or not an object. Setting a value equal to the current one (same JSON value) changes nothing.
   */
  Status set(const Path& path, const nlohmann::ordered_json& value);
  /** Removes the member at `path`; false if it was absent. */
  bool erase(const Path& path);

  /** The document text: byte-identical to the input when nothing was changed. */
  std::string dump() const;
  /**
   * The value at `path` (the root for an empty path) re-serialized as a standalone document in this
   * file's style: whitespace regenerated, scalar lexemes (numbers, strings) kept verbatim, with the
   * file's trailing-newline convention. For a Python-written file, dump_styled({}) == the input.
   */
  std::optional<std::string> dump_styled(const Path& path = {}) const;

  struct Node;  // implementation detail (json_edit.cc)

 private:
  JsonDocument();
  std::string text_;
  std::string source_;
  JsonStyle style_;
  std::unique_ptr<Node> root_;
  std::size_t lead_ = 0, trail_ = 0;  ///< root value span [lead_, trail_) in text_
  bool modified_ = false;
};

}  // namespace fp4forge
