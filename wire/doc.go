// Package wire is the WebSocket protocol of eventhub and nothing else: the
// [Frame] every message is, the op table ([Ops]), [Decode] / [Encode] and
// the Append functions that encode the hot frames without reflection, and
// the table of error codes ([Codes]) with the close code and HTTP status of
// each.
//
// It does no I/O and knows no session: the server (package gateway) and the
// Go client (package client) both speak it. Everything in it is safe for
// concurrent use; the tables are read only and handed out as copies.
package wire
