// Chat template detection and rendering: see chat_template.h.
#include "chat/chat_template.h"

#include "common/error.h"

namespace specula {

namespace {

bool has(std::string_view s, std::string_view marker) {
    return s.find(marker) != std::string_view::npos;
}

// Strips leading and trailing whitespace (Llama 3's template applies `| trim` to each message).
std::string trim(const std::string& s) {
    const char* ws = " \t\n\r";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string render_chatml(const std::vector<ChatMessage>& msgs, bool gen) {
    std::string out;
    for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (gen) out += "<|im_start|>assistant\n";
    return out;
}

std::string render_llama3(const std::vector<ChatMessage>& msgs, bool gen) {
    std::string out;
    for (const auto& m : msgs) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) +
               "<|eot_id|>";
    }
    if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

// Llama 2 chat: a system message goes inside the first [INST] block between <<SYS>> markers.
std::string render_llama2(const std::vector<ChatMessage>& msgs, bool with_sys_block) {
    std::string out, system;
    bool first_user = true;
    for (const auto& m : msgs) {
        if (m.role == "system") {
            system = m.content;
        } else if (m.role == "user") {
            std::string content = m.content;
            if (first_user && !system.empty()) {
                content = with_sys_block ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
                                         : system + "\n\n" + content;
            }
            first_user = false;
            out += with_sys_block ? "[INST] " + trim(content) + " [/INST]"
                                  : "[INST] " + trim(content) + "[/INST]";
        } else {
            (out += ' ') += trim(m.content);  // (" " + string&& trips GCC 12's -Wrestrict)
            out += "</s>";
        }
    }
    return out;  // the generation prompt is the open [/INST]
}

// Gemma has no system role: a system message is prepended to the first user turn.
std::string render_gemma(const std::vector<ChatMessage>& msgs, bool gen) {
    std::string out, system;
    for (const auto& m : msgs) {
        if (m.role == "system") {
            system = m.content + "\n\n";
            continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        std::string content = trim(m.content);
        if (role == "user" && !system.empty()) {
            content = system + content;
            system.clear();
        }
        out += "<start_of_turn>" + role + "\n" + content + "<end_of_turn>\n";
    }
    if (gen) out += "<start_of_turn>model\n";
    return out;
}

std::string render_phi3(const std::vector<ChatMessage>& msgs, bool gen) {
    std::string out;
    for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    if (gen) out += "<|assistant|>\n";
    return out;
}

std::string render_plain(const std::vector<ChatMessage>& msgs, bool gen) {
    std::string out;
    for (const auto& m : msgs) {
        const std::string role = m.role == "system"      ? "System"
                                 : m.role == "assistant" ? "Assistant"
                                                         : "User";
        out += role + ": " + m.content + "\n";
    }
    if (gen) out += "Assistant:";
    return out;
}

}  // namespace

ChatFormat detect_chat_format(std::string_view t) {
    if (has(t, "<|im_start|>")) return ChatFormat::ChatML;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return ChatFormat::Llama3;
    if (has(t, "<start_of_turn>")) return ChatFormat::Gemma;
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return ChatFormat::Phi3;
    if (has(t, "[INST]")) return has(t, "<<SYS>>") ? ChatFormat::Llama2 : ChatFormat::Mistral;
    return ChatFormat::Plain;
}

const char* chat_format_name(ChatFormat f) {
    switch (f) {
        case ChatFormat::ChatML:
            return "chatml";
        case ChatFormat::Llama2:
            return "llama2";
        case ChatFormat::Llama3:
            return "llama3";
        case ChatFormat::Mistral:
            return "mistral";
        case ChatFormat::Gemma:
            return "gemma";
        case ChatFormat::Phi3:
            return "phi3";
        case ChatFormat::Plain:
            break;
    }
    return "plain";
}

ChatFormat parse_chat_format(std::string_view v) {
    const ChatFormat all[] = {ChatFormat::ChatML,  ChatFormat::Llama2, ChatFormat::Llama3,
                              ChatFormat::Mistral, ChatFormat::Gemma,  ChatFormat::Phi3,
                              ChatFormat::Plain};
    std::string names;
    for (ChatFormat f : all) {
        if (v == chat_format_name(f)) return f;
        names += std::string(names.empty() ? "" : ", ") + chat_format_name(f);
    }
    if (v == "qwen" || v == "qwen2") return ChatFormat::ChatML;
    const ChatFormat detected = detect_chat_format(v);
    if (detected != ChatFormat::Plain) return detected;
    fail("unknown chat template '", std::string(v.substr(0, 64)), "' (use one of ", names,
         ", or a template text with one of their markers)");
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& msgs, bool gen) {
    switch (f) {
        case ChatFormat::ChatML:
            return render_chatml(msgs, gen);
        case ChatFormat::Llama3:
            return render_llama3(msgs, gen);
        case ChatFormat::Llama2:
            return render_llama2(msgs, true);
        case ChatFormat::Mistral:
            return render_llama2(msgs, false);
        case ChatFormat::Gemma:
            return render_gemma(msgs, gen);
        case ChatFormat::Phi3:
            return render_phi3(msgs, gen);
        case ChatFormat::Plain:
            break;
    }
    return render_plain(msgs, gen);
}

}  // namespace specula
