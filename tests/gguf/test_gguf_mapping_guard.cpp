// A mapped GGUF file changed on disk (gguf/mapping_guard.h, GGUFFile::changed_on_disk): truncated
// under the mapping, a read of its vanished pages does not kill the process (SIGBUS, survived: the
// range reads zeros) and the file says it was truncated; written in place, it says it changed;
// replaced by rename (a new inode), the mapping still holds the file that was loaded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gguf/gguf.h"
#include "test_util.h"

namespace {

using specula::GGUFFile;

std::string copy_of_model(const std::string& name) {
    const std::string dir = specula::test::temp_dir("mapping-guard");
    const std::string path = dir + "/" + name;
    std::filesystem::copy_file(specula::test::shared_path("models/tinystories/stories260K.gguf"),
                               path, std::filesystem::copy_options::overwrite_existing);
    return path;
}

const specula::GGUFTensor& last_tensor(const GGUFFile& f) {
    const specula::GGUFTensor* last = &f.tensors().front();
    for (const auto& t : f.tensors())
        if (t.offset > last->offset) last = &t;
    return *last;
}

TEST(GgufMappingGuard, TruncatedUnderTheMappingIsSurvivedAndReported) {
    const std::string path = copy_of_model("truncated.gguf");
    auto f = GGUFFile::open(path);
    const auto& t = last_tensor(*f);
    const volatile uint8_t* p = t.data + t.nbytes - 1;
    (void)*p;  // resident and readable while the file is whole
    EXPECT_EQ(f->changed_on_disk(), "");
    ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
    EXPECT_EQ(*p, 0) << "the vanished page reads as zeros";  // SIGBUS without the guard
    const std::string why = f->changed_on_disk();
    EXPECT_NE(why.find(path), std::string::npos) << why;
    EXPECT_NE(why.find("truncated under its mapping"), std::string::npos) << why;
}

TEST(GgufMappingGuard, WrittenInPlaceIsReported) {
    const std::string path = copy_of_model("overwritten.gguf");
    auto f = GGUFFile::open(path);
    const auto& t = last_tensor(*f);
    {
        std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
        out.seekp(std::streamoff(f->data_offset() + t.offset));
        out.put(char(0x5a));
    }
    const std::string why = f->changed_on_disk();
    EXPECT_NE(why.find(path), std::string::npos) << why;
    EXPECT_NE(why.find("changed on disk since it was loaded"), std::string::npos) << why;
}

TEST(GgufMappingGuard, ReplacedByRenameKeepsWhatWasLoaded) {
    const std::string path = copy_of_model("renamed.gguf");
    auto f = GGUFFile::open(path);
    const auto& t = last_tensor(*f);
    const uint8_t before = t.data[0];
    const std::string other = path + ".new";
    {
        std::ofstream out(other, std::ios::binary);
        out << "not a model";
    }
    std::filesystem::rename(other, path);
    EXPECT_EQ(f->changed_on_disk(), "");
    EXPECT_EQ(t.data[0], before);
}

}  // namespace
