local LEASES, HOLDERS, RECEIPT_KEY = KEYS[1], KEYS[2], KEYS[3]
local CLAIMS, RECEIPT_SECONDS = tonumber(ARGV[1]), tonumber(ARGV[2])
local RECORDS, URL_ENDS, URLS = ARGV[3], ARGV[4], ARGV[5]
local record  -- record(i): the claim key and member of the i-th record (the prelude sets it, after locate)
