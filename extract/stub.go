// Package extract is a stand-in with the agreed API until the real package lands.
package extract

import (
	"io"

	"breakwater/frontier"
)

type Kind uint8

const (
	Navigation Kind = iota
	Requisite
	Frame
)

type Link struct {
	frontier.Link
	Kind          Kind
	Element, Attr string
}

type Page struct {
	Title string
	Links []Link
}

func ScanHTML(pageURL, contentType string, body io.Reader) (Page, error) { return Page{}, nil }
func ScanCSS(cssURL, contentType string, body io.Reader) ([]Link, error) { return nil, nil }
func IsCSS(contentType string) bool                                     { return false }
