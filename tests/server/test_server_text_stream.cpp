// TextStream (server/serving/text_stream.h): text leaves only when it can no longer become a stop
// string or the start of an unfinished UTF-8 character, is cut before the first complete stop
// string, and keeps each token's drafted flag on the pieces it is split into.
#include <gtest/gtest.h>

#include "server/serving/text_stream.h"

namespace {

using specula::TextStream;
using specula::TokenPiece;

std::string text_of(const std::vector<TokenPiece>& pieces) {
    std::string s;
    for (const auto& p : pieces) s += p.text;
    return s;
}

TEST(TextStream, NoStopsPassesTextThrough) {
    TextStream ts({});
    EXPECT_FALSE(ts.push(" Once", false));
    EXPECT_EQ(text_of(ts.take()), " Once");
    EXPECT_FALSE(ts.push(" upon", true));
    auto pieces = ts.take();
    ASSERT_EQ(pieces.size(), 1u);
    EXPECT_EQ(pieces[0].text, " upon");
    EXPECT_TRUE(pieces[0].drafted);
    EXPECT_TRUE(ts.finish().empty());
}

TEST(TextStream, HoldsBackAPossibleStopAndCutsAtIt) {
    TextStream ts({"END"});
    EXPECT_FALSE(ts.push("abc E", false));
    EXPECT_EQ(text_of(ts.take()), "abc ");  // "E" may start "END"
    EXPECT_FALSE(ts.push("x", true));
    EXPECT_EQ(text_of(ts.take()), "Ex");  // it did not
    EXPECT_FALSE(ts.push("yE", false));
    EXPECT_EQ(text_of(ts.take()), "y");
    EXPECT_TRUE(ts.push("NDzz", true));  // "END" is complete: cut before it
    EXPECT_TRUE(ts.stopped());
    EXPECT_EQ(text_of(ts.take()), "");
    EXPECT_TRUE(ts.push("more", false));
    EXPECT_EQ(text_of(ts.finish()), "");
}

TEST(TextStream, StopInsideOneTokenKeepsTheTextBefore) {
    TextStream ts({"\n\n", "The end"});
    EXPECT_TRUE(ts.push("done.\n\nNext", true));
    auto pieces = ts.take();
    ASSERT_EQ(pieces.size(), 1u);
    EXPECT_EQ(pieces[0].text, "done.");
    EXPECT_TRUE(pieces[0].drafted);
}

TEST(TextStream, SplitsHeldTextByToken) {
    TextStream ts({"xyz"});
    ts.push("ab", true);
    ts.push("cx", false);  // "x" held back
    auto pieces = ts.take();
    ASSERT_EQ(pieces.size(), 2u);
    EXPECT_EQ(pieces[0].text, "ab");
    EXPECT_TRUE(pieces[0].drafted);
    EXPECT_EQ(pieces[1].text, "c");
    EXPECT_FALSE(pieces[1].drafted);
    auto rest = ts.finish();  // generation ended: the held "x" goes out, still not drafted
    ASSERT_EQ(rest.size(), 1u);
    EXPECT_EQ(rest[0].text, "x");
    EXPECT_FALSE(rest[0].drafted);
}

TEST(TextStream, WaitsForTheRestOfAUtf8Character) {
    const std::string euro = "\xE2\x82\xAC";  // U+20AC in three bytes, as byte-fallback tokens
    TextStream ts({});
    ts.push("a" + euro.substr(0, 1), false);
    EXPECT_EQ(text_of(ts.take()), "a");
    ts.push(euro.substr(1, 1), false);
    EXPECT_EQ(text_of(ts.take()), "");
    ts.push(euro.substr(2, 1), true);
    EXPECT_EQ(text_of(ts.take()), euro);
    EXPECT_EQ(specula::incomplete_utf8_tail("ok\xF0\x9F"), 2u);
    EXPECT_EQ(specula::incomplete_utf8_tail("ok\xF0\x9F\x98\x80"), 0u);
    EXPECT_EQ(specula::incomplete_utf8_tail("\xC3"), 1u);
}

}  // namespace
