// The `reprise` command-line tool on sound and damaged checkpoint directories.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/version_store.hpp"
#include "reprise/reprise.hpp"
#include "support/test_support.hpp"

namespace reprise {
namespace {

struct Result {
  int status;
  std::string output;
};

Result run_cli(const std::string& args) {
  const std::string cmd = std::string(REPRISE_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  Result r{-1, ""};
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    Config c;
    c.dir = dir_.path();
    c.chunk_bytes = 4096;
    c.full_every = 3;
    for (int rank : {0, 1}) {
      c.rank = rank;
      Runtime rt(c);
      std::vector<unsigned char> data(40000);
      test::fill_random(data.data(), data.size(), 5);
      rt.protect("field", data.data(), data.size(), MemorySpace::Host);
      for (int s = 1; s <= 4; ++s) {
        data[std::size_t(s) * 5000] ^= 1;
        rt.checkpoint(std::uint64_t(s) * 10);
      }
      rt.wait();
    }
  }
  test::ScratchDir dir_;
};

TEST_F(Cli, InspectListsVersionsRegionsAndChains) {
  const Result r = run_cli("inspect " + dir_.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("2 rank(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("differential"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("region field"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 of 10 chunks"), std::string::npos) << r.output;
  const Result j = run_cli("inspect --json " + dir_.path());
  EXPECT_EQ(j.status, 0);
  EXPECT_NE(j.output.find("\"dirty_ratio\""), std::string::npos) << j.output;
}

TEST_F(Cli, InspectShowsTheJobRecordAndFailsOnADamagedOne) {
  EXPECT_NE(run_cli("inspect " + dir_.path()).output.find("2 rank(s), no job record"), std::string::npos);
  core::write_job_ranks(dir_.path(), 2);
  Result r = run_cli("inspect " + dir_.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("2 rank(s), written by a job of 2 ranks"), std::string::npos) << r.output;
  EXPECT_NE(run_cli("inspect --json " + dir_.path()).output.find("\"job_ranks\": 2"), std::string::npos);
  test::write_file(dir_.path() + "/job.reprise", {'x'});
  r = run_cli("inspect " + dir_.path());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("DAMAGED job record: " + dir_.path() + "/job.reprise: not a Reprise job record"),
            std::string::npos)
      << r.output;
}

TEST_F(Cli, VerifySucceedsOnASoundDirectory) {
  const Result r = run_cli("verify " + dir_.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("8 version(s) sound, 0 damaged"), std::string::npos) << r.output;
}

TEST_F(Cli, VerifyNamesTheDamagedFileAndFails) {
  const std::string victim = core::version_file_path(dir_.path(), 1, 20);
  test::flip_byte(victim, std::filesystem::file_size(victim) - 3);
  const Result r = run_cli("verify " + dir_.path());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("DAMAGED  " + victim), std::string::npos) << r.output;
  // version 30 of rank 1 is built on 20 (full at 10, diffs 20, 30; full again at 40)
  EXPECT_NE(r.output.find("2 damaged"), std::string::npos) << r.output;
}

TEST_F(Cli, VerifyChecksTheJobRecord) {
  core::write_job_ranks(dir_.path(), 2);
  Result r = run_cli("verify " + dir_.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ok       " + dir_.path() + "/job.reprise (2 ranks)"), std::string::npos) << r.output;
  const std::string record = dir_.path() + "/job.reprise";
  test::flip_byte(record, 18);  // the rank count's digit
  r = run_cli("verify " + dir_.path());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("DAMAGED  " + record + ": "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("8 version(s) sound, 1 damaged"), std::string::npos) << r.output;
  core::write_job_ranks(dir_.path(), 2);
  test::truncate_file(record, std::filesystem::file_size(record) - 5);
  r = run_cli("verify " + dir_.path());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("DAMAGED  " + record + ": not a Reprise job record"), std::string::npos) << r.output;
}

TEST_F(Cli, VerifyReportsAMissingLinkAndATruncatedFile) {
  std::filesystem::remove(core::version_file_path(dir_.path(), 0, 20));
  test::truncate_file(core::version_file_path(dir_.path(), 1, 40), 70);
  const Result r = run_cli("verify " + dir_.path());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("needs version 20"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
}

TEST(CliUsage, BadArgumentsAndMissingDirectoriesFailClearly) {
  EXPECT_NE(run_cli("").status, 0);
  EXPECT_NE(run_cli("frobnicate /tmp").status, 0);
  const Result r = run_cli("verify /nonexistent/reprise/dir");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("not a directory"), std::string::npos) << r.output;
  test::ScratchDir empty;
  const Result e = run_cli("inspect " + empty.path());
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.output.find("holds no checkpoint"), std::string::npos) << e.output;
}

}  // namespace
}  // namespace reprise
