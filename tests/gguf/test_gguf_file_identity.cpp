// A model file's identity beyond its size and mtime (gguf/file_identity.h, issue #45): a copy of
// stories260K rewritten in place with its size and modification time restored is a change
// (changed_on_disk names it); a chmod (a new ctime, the same content) is not; the sampled hash
// tells apart two files of the same size and differs from a byte changed in a sampled block.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gguf/file_identity.h"
#include "gguf/gguf.h"
#include "test_util.h"

namespace {

using specula::GGUFFile;

std::string copy_model(const std::string& name) {
    const std::string dst = specula::test::temp_dir("identity") + "/" + name;
    std::filesystem::copy_file(specula::test::shared_path("models/tinystories/stories260K.gguf"),
                               dst, std::filesystem::copy_options::overwrite_existing);
    return dst;
}

// Flips the file's last byte (in the last sampled block) in place, keeping its size, then sets
// its access and modification times back to what they were.
void rewrite_keeping_mtime(const std::string& path) {
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    const int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    unsigned char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, st.st_size - 1), 1);
    c ^= 0x5a;
    ASSERT_EQ(::pwrite(fd, &c, 1, st.st_size - 1), 1);
    const timespec times[2] = {st.st_atim, st.st_mtim};
    ASSERT_EQ(::futimens(fd, times), 0);
    ::close(fd);
}

TEST(GGUFFileIdentity, ARewriteWithTheMtimeRestoredIsAChange) {
    const std::string path = copy_model("rewrite.gguf");
    const auto f = GGUFFile::open(path);
    EXPECT_EQ(f->changed_on_disk(), "");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a ctime the rewrite moves
    rewrite_keeping_mtime(path);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(uint64_t(st.st_size), f->identity().size);
    EXPECT_EQ(int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, f->identity().mtime_ns);
    const std::string why = f->changed_on_disk();
    EXPECT_NE(why.find(path), std::string::npos) << why;
    EXPECT_NE(why.find("rewritten"), std::string::npos) << why;
}

TEST(GGUFFileIdentity, AChmodIsNotAChange) {
    const std::string path = copy_model("chmod.gguf");
    const auto f = GGUFFile::open(path);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
    EXPECT_EQ(f->changed_on_disk(), "");
    EXPECT_EQ(f->changed_on_disk(), "");  // the new ctime, verified once, is remembered
}

TEST(GGUFFileIdentity, TheSampledHashSeesContentNotJustSize) {
    const std::string a = copy_model("a.gguf");
    const std::string b = copy_model("b.gguf");
    const auto fa = GGUFFile::open(a);
    const auto fb = GGUFFile::open(b);
    EXPECT_EQ(fa->identity().sample_hash, fb->identity().sample_hash);  // same content
    EXPECT_NE(fa->identity().ino, fb->identity().ino);
    rewrite_keeping_mtime(b);
    const int fd = ::open(b.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    EXPECT_NE(specula::sampled_hash(fd, fb->identity().size), fa->identity().sample_hash);
    ::close(fd);
}

}  // namespace
