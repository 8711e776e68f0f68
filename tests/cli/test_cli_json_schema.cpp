// llama-cli's -j (--json-schema) and -jf (--json-schema-file) in `specula run` and `specula chat`:
// the output is JSON that the schema admits (the subset `serve` takes in response_format), greedy
// or sampled, plain or speculative (a draft model, n-gram lookup: the same text as plain decoding,
// since the verifier checks every draft against the constrained rows), and in a conversation every
// reply is one such value. A schema that is not JSON, not an object, uses a keyword the grammar
// does not support, or comes twice is one error line naming the flag; serve and bench refuse the
// flags naming where a schema goes instead.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "cli_process.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using specula::test::describe;
using specula::test::expect_clean_error;
using specula::test::llama2xs;
using specula::test::ProcResult;
using specula::test::run_specula;
using specula::test::shared_path;
using specula::test::stories;
namespace fs = std::filesystem;

// A pet record: two required properties, nothing else.
const char* const kPet =
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 24},
        "kind": {"enum": ["cat", "dog", "bird"]}, "age": {"type": "integer"}},
        "required": ["name", "kind", "age"], "additionalProperties": false})";

// Parses `text` as JSON (failing the test when it is not) and checks it is a pet record.
void expect_pet(const std::string& text) {
    const json v = json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << "not JSON: [" << text << "]";
    ASSERT_TRUE(v.is_object()) << text;
    EXPECT_EQ(v.size(), 3u) << text;
    ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << text;
    EXPECT_LE(v["name"].get<std::string>().size(), 24u * 4) << text;
    ASSERT_TRUE(v.contains("kind") && v["kind"].is_string()) << text;
    const std::string kind = v["kind"];
    EXPECT_TRUE(kind == "cat" || kind == "dog" || kind == "bird") << text;
    ASSERT_TRUE(v.contains("age") && v["age"].is_number_integer()) << text;
}

ProcResult run_pet(const std::string& model, std::vector<std::string> extra) {
    std::vector<std::string> args{"run", "-m",  model, "-p", "Once upon a time",
                                  "-n",  "200", "-j",  kPet};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_specula(args);
}

TEST(CliJsonSchema, GreedyOutputIsTheSchemasJsonAndSpeculationKeepsIt) {
    const ProcResult plain = run_pet(llama2xs(), {"--temp", "0"});
    ASSERT_EQ(plain.status, 0) << describe(plain);
    expect_pet(plain.out);
    // Without the schema the model writes a story, not JSON.
    const ProcResult free_text =
        run_specula({"run", "-m", llama2xs(), "-p", "Once upon a time", "-n", "40", "--temp", "0"});
    ASSERT_EQ(free_text.status, 0) << describe(free_text);
    EXPECT_TRUE(json::parse(free_text.out, nullptr, false).is_discarded()) << free_text.out;

    for (const std::vector<std::string>& spec :
         {std::vector<std::string>{"-md", stories(), "--draft", "4"},
          {"-md", stories(), "--draft", "auto"},
          {"-md", stories(), "--draft", "3", "--forced-drafts", "0"},
          {"--spec-type", "ngram", "--draft", "3"}}) {
        std::vector<std::string> extra{"--temp", "0"};
        extra.insert(extra.end(), spec.begin(), spec.end());
        const ProcResult r = run_pet(llama2xs(), extra);
        ASSERT_EQ(r.status, 0) << describe(r);
        EXPECT_EQ(r.out, plain.out) << spec[0] << " " << spec[spec.size() - 1];
    }

    // -jf reads the same schema from a file.
    const fs::path file = fs::temp_directory_path() / "specula_test_pet_schema.json";
    std::ofstream(file) << kPet;
    const ProcResult from_file = run_specula({"run", "-m", llama2xs(), "-p", "Once upon a time",
                                              "-n", "200", "--temp", "0", "-jf", file.string()});
    ASSERT_EQ(from_file.status, 0) << describe(from_file);
    EXPECT_EQ(from_file.out, plain.out);
    fs::remove(file);
}

TEST(CliJsonSchema, SampledOutputIsTheSchemasJson) {
    for (const std::string seed : {"1", "7", "42"}) {
        for (const std::vector<std::string>& spec :
             {std::vector<std::string>{}, {"-md", stories(), "--draft", "4"}}) {
            std::vector<std::string> extra{"--temp", "0.9", "--seed", seed};
            extra.insert(extra.end(), spec.begin(), spec.end());
            const ProcResult r = run_pet(llama2xs(), extra);
            ASSERT_EQ(r.status, 0) << describe(r);
            SCOPED_TRACE("seed " + seed + (spec.empty() ? " plain" : " -md"));
            expect_pet(r.out);
        }
    }
    // "{}" admits any JSON value.
    const ProcResult any =
        run_specula({"run", "-m", stories(), "-p", "Once", "-n", "200", "--temp", "0", "-j", "{}"});
    ASSERT_EQ(any.status, 0) << describe(any);
    EXPECT_FALSE(json::parse(any.out, nullptr, false).is_discarded()) << any.out;
}

TEST(CliJsonSchema, EveryChatReplyIsOneValue) {
    const fs::path in = fs::temp_directory_path() / "specula_test_json_chat.txt";
    std::ofstream(in) << "Tell me about a pet\nAnd another one\n";
    const ProcResult r = run_specula({"chat", "-m", llama2xs(), "-md", stories(), "-p", "A pet",
                                      "-j", kPet, "--temp", "0", "-n", "200"},
                                     in.string());
    fs::remove(in);
    ASSERT_EQ(r.status, 0) << describe(r);
    // Replies end with a blank line, then the next user line is echoed after "> ".
    std::vector<std::string> replies;
    size_t at = 0;
    for (size_t end; (end = r.out.find("\n\n> ", at)) != std::string::npos; at = end + 4) {
        std::string chunk = r.out.substr(at, end - at);
        if (!replies.empty()) chunk.erase(0, chunk.find('\n') + 1);  // the echoed user line
        replies.push_back(chunk);
    }
    ASSERT_EQ(replies.size(), 3u) << r.out;
    for (const std::string& reply : replies) expect_pet(reply);
}

TEST(CliJsonSchema, BadSchemasAreOneErrorLine) {
    auto run = [](std::vector<std::string> extra) {
        std::vector<std::string> args{"run", "-m", stories(), "-p", "x", "-n", "4"};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_specula(args);
    };
    expect_clean_error(run({"-j", R"({"allOf": [{"type": "string"}]})"}),
                       "-j (--json-schema): json_schema: unsupported keyword 'allOf'");
    expect_clean_error(
        run({"--json-schema", R"({"type": "object", "properties": {"a": {"minimum": 1}}})"}),
        "unsupported keyword 'minimum' at /properties/a");
    expect_clean_error(run({"-j", R"({"type": )"}), "-j (--json-schema): not valid JSON");
    expect_clean_error(run({"-j", "[1, 2]"}), "-j (--json-schema): a JSON schema is an object");
    expect_clean_error(run({"-j", "{}", "-jf", "/nonexistent/schema.json"}), "not both");
    expect_clean_error(run({"-jf", "/nonexistent/schema.json"}), "/nonexistent/schema.json");
    expect_clean_error(run({"--grammar-file", "g.gbnf"}),
                       "--grammar-file: GBNF grammars are not implemented; -j");
    expect_clean_error(run_specula({"serve", "-m", stories(), "-j", "{}"}),
                       "-j (--json-schema): a JSON schema is given per request");
    expect_clean_error(run_specula({"bench", "-m", stories(), "-jf", "s.json"}),
                       "-jf (--json-schema-file): a JSON schema constrains `specula run`");
}

}  // namespace
