//go:build !linux

package dirstore

import "errors"

// Off Linux the counter lives in the .fence-<kind> file only.
func getFenceAttr(string, string) ([]byte, error) { return nil, errors.ErrUnsupported }

func setFenceAttr(string, string, []byte) error { return errors.ErrUnsupported }

func attrAbsent(error) bool { return true }
