#pragma once
/**
 * Secrets by shape, wherever they stand (issue 27 #3): what fp4forge prints of untrusted text (a LiteLLM
 * config, an --api-base argument, a server's reply) never carries a credential, whatever the key that holds
 * it is called. Masked: URL userinfo passwords (`http://user:***@host`), the values of key/token/signature
 * query parameters (`?key=***`), `Bearer ***` / `Basic ***` tokens, and PEM private-key blocks. Key-named
 * secrets (`api_key: ...`) are the gateway's own masking, which calls this for the rest.
 */
#include <string>
#include <string_view>

namespace fp4forge::util {

/** `url` with the password of its userinfo and the values of secret query parameters replaced by `***`. */
std::string redact_url(std::string_view url);

/** One line of text with every URL redacted (redact_url), `Bearer`/`Basic` tokens and PEM key lines masked. */
std::string redact_line(std::string_view line);

/** True for a parameter or key name that holds a secret: a word of the name (split at non-alphanumerics and at
 * camelCase steps) holding key, token, secret, password, passwd, credential, auth(orization), private, cookie,
 * session or signature, or equal to sig (any case); ordinary words that merely contain one (`tokens`, `tokenizer`,
 * `keyboard`, `author`, ...) are not secrets. */
bool is_secret_name(std::string_view name);

}  // namespace fp4forge::util
