package proxy

// IdentityHeaders is identityHeaders for the external tests.
var IdentityHeaders = identityHeaders
