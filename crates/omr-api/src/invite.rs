//! Invite codes, as operators hand them out and recipients type them: 128 random bits as 32
//! hexadecimal digits. [`normalize_invite_code`] is the one check both sides make of a code's
//! shape (the server then looks up its hash; the shape says nothing about validity).

use std::fmt;

/// Hexadecimal digits in an invite code (128 bits).
pub const INVITE_CODE_HEX_DIGITS: usize = 32;

/// Why a string is not an invite code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedInviteCode {
    /// Characters given (after trimming white space).
    pub len: usize,
    /// Whether they were all hexadecimal digits.
    pub hex: bool,
}

impl fmt::Display for MalformedInviteCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an invite code is {INVITE_CODE_HEX_DIGITS} hexadecimal digits; this one has {} \
             characters{}: copy it exactly as `omrd invite create` printed it",
            self.len,
            if self.hex {
                ""
            } else {
                ", not all of them hexadecimal"
            }
        )
    }
}

impl std::error::Error for MalformedInviteCode {}

/// `code` trimmed and in lower case, if it has an invite code's shape.
pub fn normalize_invite_code(code: &str) -> Result<String, MalformedInviteCode> {
    let code = code.trim();
    let hex = code.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || code.len() != INVITE_CODE_HEX_DIGITS {
        return Err(MalformedInviteCode {
            len: code.chars().count(),
            hex,
        });
    }
    Ok(code.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_32_hex_digits_are_a_code() {
        let code = "0123456789abcdef0123456789ABCDEF";
        assert_eq!(
            normalize_invite_code(&format!(" {code}\n")).unwrap(),
            code.to_ascii_lowercase()
        );
        assert_eq!(
            normalize_invite_code(&code[1..]),
            Err(MalformedInviteCode { len: 31, hex: true })
        );
        let err = normalize_invite_code("zz").unwrap_err();
        assert!(!err.hex);
        assert!(err.to_string().contains("32 hexadecimal digits"), "{err}");
        assert!(normalize_invite_code("").is_err());
        // Multi-byte characters are counted as characters, never sliced.
        assert_eq!(
            normalize_invite_code("é".repeat(16).as_str())
                .unwrap_err()
                .len,
            16
        );
    }
}
