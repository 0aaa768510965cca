// Package keyring encrypts the secrets the server itself must use (tower keys, gateway bearer
// secrets, JWT signing keys, the access-code key) under one master key from the settings, so
// every apiserver and worker instance shares them through Postgres and a restart keeps them.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the master key length in bytes (AES-256).
const KeySize = 32

// ErrNoMasterKey means neither the key nor a key file was configured.
var ErrNoMasterKey = errors.New("no master key: set LOCKERNET_MASTER_KEY or LOCKERNET_MASTER_KEY_FILE")

// Keyring seals and opens secrets with AES-256-GCM. The associated data binds a sealed value
// to its purpose (e.g. "tower:0100000000000014"), so a value copied to another row won't open.
type Keyring struct {
	aead   cipher.AEAD
	master []byte
}

// New builds a keyring from a 32-byte master key.
func New(key []byte) (*Keyring, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("new keyring: master key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("new keyring: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("new keyring: %w", err)
	}
	return &Keyring{aead: aead, master: append([]byte(nil), key...)}, nil
}

// ParseKey decodes a master key written as 64 hex characters.
func ParseKey(s string) ([]byte, error) {
	key, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(key) != KeySize {
		return nil, fmt.Errorf("parse master key: want %d hex characters", KeySize*2)
	}
	return key, nil
}

// Load returns the keyring for the configured key, or the key in keyFile.
func Load(hexKey, keyFile string) (*Keyring, error) {
	if hexKey == "" && keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("read master key file: %w", err)
		}
		hexKey = string(b)
	}
	if hexKey == "" {
		return nil, ErrNoMasterKey
	}
	key, err := ParseKey(hexKey)
	if err != nil {
		return nil, err
	}
	return New(key)
}

// EnsureKeyFile returns the key stored in path, creating the file with a fresh random key
// (mode 0600) when it does not exist yet. The dev stack keeps its key in the data dir.
func EnsureKeyFile(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if _, err := ParseKey(string(b)); err != nil {
			return "", fmt.Errorf("master key file %s: %w", path, err)
		}
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read master key file: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate master key: %w", err)
	}
	s := hex.EncodeToString(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create master key dir: %w", err)
	}
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write master key file: %w", err)
	}
	return s, nil
}

// Seal encrypts plaintext for the given purpose. The nonce is prepended to the result.
func (k *Keyring) Seal(purpose string, plaintext []byte) []byte {
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plaintext)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(fmt.Sprintf("keyring: read random nonce: %v", err)) // crypto/rand never fails on Linux
	}
	return k.aead.Seal(nonce, nonce, plaintext, []byte(purpose))
}

// Open decrypts a value sealed for the given purpose.
func (k *Keyring) Open(purpose string, sealed []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n+k.aead.Overhead() {
		return nil, errors.New("open sealed value: too short")
	}
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], []byte(purpose))
	if err != nil {
		return nil, fmt.Errorf("open sealed value for %s: %w", purpose, err)
	}
	return plain, nil
}

// Derive returns a 32-byte key for one purpose, derived from the master key with
// HKDF-SHA256: the access-code encryption and lookup keys come from here, so they need no
// storage of their own and every instance agrees on them.
func (k *Keyring) Derive(label string) []byte {
	out, err := hkdf.Key(sha256.New, k.master, nil, "lockernet/"+label, KeySize)
	if err != nil {
		panic(fmt.Sprintf("keyring: derive %s: %v", label, err)) // only fails for absurd lengths
	}
	return out
}
