// What `run` and its conversation mode (`run -cnv`, `chat`) build alike from RunOptions over the
// one runtime (runtime/runtime.h): the sampler and the constraints (penalties, logit bias, -j's
// grammar) on top of its model, session and drafter, all checked before any token is generated,
// plus the piece writer that streams generated text to stdout.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/session.h"
#include "runtime/runtime.h"
#include "sampling/constraints.h"
#include "sampling/sampler.h"
#include "speculative/draft_length/draft_length.h"
#include "speculative/generator.h"

namespace specula::cli {

// Checks the options that need no model (thread counts, sampling ranges).
void check_run_options(const RunOptions& o);

// The prompt (-p, or the file of -f) and the reverse prompts (-r), after llama-cli's escape
// processing unless --no-escape.
std::string prompt_text(const RunOptions& o);
std::vector<std::string> reverse_prompts(const RunOptions& o);

// Everything the generation loop runs with: the runtime (runtime/runtime.h: the target, its
// session, the drafter, the context), the sampler and constraints; built once, kept across a
// conversation's turns.
struct RunSetup {
    Runtime rt;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<Constraints> constraints;
    DraftLengthController auto_length;  // --draft auto
    GenParams gen;

    // A Generator over this setup (it must not outlive it).
    Generator make_generator();
};
// Opens the runtime of run / chat from the options and the speculative flags parsed once
// (`spec`): loads the models, calls before_caches (run refuses a prompt that cannot fit, chat
// picks its template), makes the constraints, logs and checks the memory plan, allocates the
// caches (an Error suggesting a smaller -c when memory runs out) and logs the model / context /
// cache types / threads / seed line and the drafter's.
std::unique_ptr<RunSetup> open_run(const RunOptions& o, const SpeculativeConfig& spec,
                                   const std::function<void(const Runtime&)>& before_caches);

// Writes token pieces to stdout as they come and keeps the text. llama2.c drops the space that
// SentencePiece puts in front of the first word when generation starts from BOS alone; so do
// we, for that case only. Special tokens print their text only with -sp (as llama-cli). The
// writer also watches for -r's reverse prompts: operator() returns false once the text written
// contains one (the piece that completes it is still written, as llama-cli prints it).
class PieceWriter {
  public:
    PieceWriter(const Tokenizer& tok, bool strip_first_space, const RunOptions& o)
        : tok_(tok),
          strip_first_space_(strip_first_space),
          special_(o.special),
          stops_(reverse_prompts(o)) {}

    bool operator()(token_id id);                      // false: a reverse prompt was written
    const std::string& text() const { return text_; }  // everything written

  private:
    const Tokenizer& tok_;
    bool strip_first_space_;
    bool special_;
    std::vector<std::string> stops_;
    bool first_ = true;
    std::string text_;
};

}  // namespace specula::cli
