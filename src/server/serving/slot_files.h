// llama-server's slot files (POST /slots/{id}?action=save|restore, --slot-save-path): a slot's
// target KV cache (model/state/kv_cache.h KVSnapshot: its tokens and K/V rows) written to a file in
// the save directory and read back into a free slot later, by this process or another one serving
// the same model. The format is Specula's own:
//   "SPECULA-SLOT\0\0\0\2" (16 bytes), then u64 n_tokens, u64 k bytes, u64 v bytes, u64 id
//   bytes, then the tokens (int32), the K bytes, the V bytes and the model's identity (a short
//   text: architecture, sizes, file size, a sampled hash of the file: gguf/file_identity.h), so
//   that a file saved from another model whose cache happens to have the same shape is refused
//   instead of restored into garbage.
// Names are plain file names (no directory part, no leading dot); a file that is not a slot file,
// is truncated or holds more than its header says is an Error naming it.
#pragma once

#include <string>

#include "model/state/kv_cache.h"

namespace specula {

// dir/filename, after checking that filename is a plain name; Error naming it otherwise.
std::string slot_file_path(const std::string& dir, const std::string& filename);

// Writes the snapshot of a cache of the model `model_id` names; returns the bytes written. Error
// naming the file when it cannot.
size_t write_slot_file(const std::string& path, const KVSnapshot& s, const std::string& model_id);

// Reads a snapshot (its shape is checked when it is restored into a session); `n_read` gets the
// file's size. Error naming the file for anything that is not a whole slot file of `model_id`.
KVSnapshot read_slot_file(const std::string& path, const std::string& model_id, size_t& n_read);

}  // namespace specula
