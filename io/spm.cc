// spm.cc — C wrapper over SentencePiece's C++ API; see spm.h.
// Every extern "C" function catches all exceptions: none may cross into C.
#include "spm.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <sys/stat.h>

struct hpt_spm {
    sentencepiece::SentencePieceProcessor proc;
};

namespace {

// msg without trailing whitespace (SentencePiece ends some messages with a space).
std::string trim_right(std::string msg)
{
    size_t end = msg.find_last_not_of(" \t\r\n\v\f");
    msg.erase(end == std::string::npos ? 0 : end + 1);
    return msg;
}

// Write a message (trailing whitespace trimmed) into the caller's buffer (if any) and return st.
hpt_spm_status fail(hpt_spm_status st, char *err, size_t errlen, const std::string &msg)
{
    if (err && errlen > 0)
        std::snprintf(err, errlen, "%s", trim_right(msg).c_str());
    return st;
}

// Map a SentencePiece status to ours, with "what: message".
hpt_spm_status from_status(const sentencepiece::util::Status &s, const std::string &what,
                           char *err, size_t errlen)
{
    using sentencepiece::util::StatusCode;
    if (s.ok())
        return HPT_SPM_OK;
    hpt_spm_status st = (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kPermissionDenied)
                            ? HPT_SPM_ERR_IO
                            : HPT_SPM_ERR_INVALID;
    return fail(st, err, errlen, what + ": " + s.ToString());
}

// Run f() and turn any exception into a status.
template <class F>
hpt_spm_status guarded(const char *what, char *err, size_t errlen, F f)
{
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return fail(HPT_SPM_ERR_NOMEM, err, errlen, std::string(what) + ": out of memory");
    } catch (const std::exception &e) {
        return fail(HPT_SPM_ERR_INVALID, err, errlen, std::string(what) + ": " + e.what());
    } catch (...) {
        return fail(HPT_SPM_ERR_INVALID, err, errlen, std::string(what) + ": unknown C++ exception");
    }
}

// Trainer arguments for a Llama-style byte-fallback BPE model.
std::unordered_map<std::string, std::string> train_args(const hpt_spm_train_opts *o)
{
    return {
        {"input", o->input},
        {"model_prefix", o->model_prefix},
        {"model_type", "bpe"},
        {"vocab_size", std::to_string(o->vocab_size)},
        {"num_threads", std::to_string(o->num_threads > 0 ? o->num_threads : 1)},
        {"input_sentence_size", std::to_string(o->input_sentence_size)},
        {"shuffle_input_sentence", "true"},
        {"byte_fallback", "true"},
        {"character_coverage", "0.9995"},
        {"max_sentence_length", std::to_string(HPT_SPM_MAX_SENTENCE_BYTES)},
        {"unk_id", "0"},
        {"bos_id", "1"},
        {"eos_id", "2"},
        {"pad_id", "-1"},
        {"minloglevel", o->verbose ? "0" : "1"},
    };
}

// The integer after `key` in msg, or 0 if key is absent.
int int_after(const std::string &msg, const char *key)
{
    size_t at = msg.find(key);
    return at == std::string::npos ? 0 : std::atoi(msg.c_str() + at + std::strlen(key));
}

// Recognise SentencePiece's training failures that have a simple cause
// (messages of trainer_interface.cc, SentencePiece 0.1.9x-0.2.x).
hpt_spm_train_diag train_diagnose(const std::string &msg)
{
    hpt_spm_train_diag d = {HPT_SPM_TRAIN_ERR_OTHER, 0};
    if (msg.find("Vocabulary size is smaller than required_chars") != std::string::npos) {
        int want = 0, need = 0;
        size_t at = msg.find("required_chars. ");
        if (at != std::string::npos && std::sscanf(msg.c_str() + at + 16, "%d vs %d", &want, &need) == 2)
            d = {HPT_SPM_TRAIN_ERR_VOCAB_SMALL, need};
    } else if (msg.find("Vocabulary size too high") != std::string::npos) {
        int most = int_after(msg, "value <= ");
        if (most > 0)
            d = {HPT_SPM_TRAIN_ERR_VOCAB_LARGE, most};
    } else if (msg.find("!sentences_.empty()") != std::string::npos) {
        d = {HPT_SPM_TRAIN_ERR_NO_SENTENCE, HPT_SPM_MAX_SENTENCE_BYTES};
    }
    return d;
}

// The message for a model that fails to load: a protobuf parse failure
// means "not a model at all"; other reasons are kept.
std::string load_message(const char *path, const sentencepiece::util::Status &s)
{
    std::string raw = trim_right(s.ToString());
    if (raw.find("ParseFromArray") != std::string::npos)
        return std::string(path) + ": not a SentencePiece model (it does not parse as one; give the "
                                   "tokenizer.model written by hpt-data or spm_train)";
    return std::string(path) + ": not a SentencePiece model: " + raw;
}

hpt_spm_status grow(hpt_spm_ids *out, size_t need)
{
    if (need <= out->cap)
        return HPT_SPM_OK;
    size_t cap = out->cap ? out->cap : 256;
    while (cap < need)
        cap *= 2;
    void *p = std::realloc(out->ids, cap * sizeof *out->ids);
    if (!p)
        return HPT_SPM_ERR_NOMEM;
    out->ids = static_cast<int32_t *>(p);
    out->cap = cap;
    return HPT_SPM_OK;
}

}  // namespace

extern "C" {

void hpt_spm_train_opts_default(hpt_spm_train_opts *o)
{
    o->input = nullptr;
    o->model_prefix = nullptr;
    o->vocab_size = 8192;
    o->num_threads = 1;
    o->input_sentence_size = 300000;
    o->seed = 1;
    o->verbose = 0;
}

hpt_spm_status hpt_spm_train_bpe(const hpt_spm_train_opts *o, hpt_spm_train_diag *diag, char *err,
                                 size_t errlen)
{
    if (diag)
        *diag = {HPT_SPM_TRAIN_ERR_OTHER, 0};
    if (!o->input || !o->model_prefix)
        return fail(HPT_SPM_ERR_INVALID, err, errlen, "SentencePiece training: input and model_prefix are required");
    std::string what = std::string(o->input) + ": SentencePiece training";
    return guarded(what.c_str(), err, errlen, [&] {
        sentencepiece::SetRandomGeneratorSeed(o->seed);
        auto s = sentencepiece::SentencePieceTrainer::Train(train_args(o));
        if (!s.ok() && diag)
            *diag = train_diagnose(s.ToString());
        return from_status(s, what, err, errlen);
    });
}

hpt_spm_status hpt_spm_load(const char *path, hpt_spm **out, char *err, size_t errlen)
{
    *out = nullptr;
    std::string what = std::string(path) + ": cannot load SentencePiece model";
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) /* a FIFO: no hang */
        return fail(HPT_SPM_ERR_IO, err, errlen, std::string(path) + ": not a regular file");
    return guarded(what.c_str(), err, errlen, [&] {
        std::unique_ptr<hpt_spm> sp(new hpt_spm);
        auto s = sp->proc.Load(path);
        hpt_spm_status st = from_status(s, what, err, errlen);
        if (st == HPT_SPM_ERR_INVALID)
            return fail(st, err, errlen, load_message(path, s));
        if (st == HPT_SPM_OK)
            *out = sp.release();
        return st;
    });
}

void hpt_spm_free(hpt_spm *sp) { delete sp; }

int hpt_spm_vocab_size(const hpt_spm *sp) { return sp->proc.GetPieceSize(); }

int hpt_spm_eos_id(const hpt_spm *sp) { return sp->proc.eos_id(); }

hpt_spm_status hpt_spm_ids_push(hpt_spm_ids *out, int32_t id)
{
    if (grow(out, out->n + 1) != HPT_SPM_OK)
        return HPT_SPM_ERR_NOMEM;
    out->ids[out->n++] = id;
    return HPT_SPM_OK;
}

hpt_spm_status hpt_spm_encode(const hpt_spm *sp, const char *text, size_t len, hpt_spm_ids *out,
                              char *err, size_t errlen)
{
    return guarded("SentencePiece encode", err, errlen, [&] {
        std::vector<int> ids;
        auto s = sp->proc.Encode(absl::string_view(text, len), &ids);
        if (!s.ok())
            return from_status(s, "SentencePiece encode", err, errlen);
        if (grow(out, out->n + ids.size()) != HPT_SPM_OK)
            return fail(HPT_SPM_ERR_NOMEM, err, errlen, "SentencePiece encode: out of memory");
        for (int id : ids)
            out->ids[out->n++] = id;
        return HPT_SPM_OK;
    });
}

hpt_spm_status hpt_spm_decode(const hpt_spm *sp, const int32_t *ids, size_t n, char **text,
                              char *err, size_t errlen)
{
    *text = nullptr;
    int v = sp->proc.GetPieceSize();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v)
            return fail(HPT_SPM_ERR_INVALID, err, errlen,
                        "SentencePiece decode: id " + std::to_string(ids[i]) + " at position " +
                            std::to_string(i) + " outside 0.." + std::to_string(v - 1));
    return guarded("SentencePiece decode", err, errlen, [&] {
        std::vector<int> v32(ids, ids + n);
        std::string s;
        auto st = sp->proc.Decode(v32, &s);
        if (!st.ok())
            return from_status(st, "SentencePiece decode", err, errlen);
        *text = static_cast<char *>(std::malloc(s.size() + 1));
        if (!*text)
            return fail(HPT_SPM_ERR_NOMEM, err, errlen, "SentencePiece decode: out of memory");
        std::memcpy(*text, s.c_str(), s.size() + 1);
        return HPT_SPM_OK;
    });
}

}  // extern "C"
