// Vocabulary compatibility of a draft model with its target, checked before drafting (token ids
// are exchanged between the two models, so they must mean the same text): same tokenizer model,
// same special ids (BOS, EOS, EOT) and add-BOS behaviour, identical token texts over the shared id
// range, and vocabulary sizes within 128 of each other. Texts are compared before sizes, so two
// different vocabularies are reported by their first differing id, with both texts.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"

namespace specula {

constexpr int kSpecVocabMaxSizeDifference = 128;

// target_name / draft_name (e.g. file paths) only label the error message.
void check_vocab_compatible(const Tokenizer& target, const Tokenizer& draft,
                            const std::string& target_name = "target",
                            const std::string& draft_name = "draft");

}  // namespace specula
