0£
ú
	crm-tools,Use numeric customer IDs, not display names.R¾
http://127.0.0.1:7000¤
customer_name+Look up the display name for a customer ID.\{"type":"object","properties":{"customer_id":{"type":"integer"}},"required":["customer_id"]}B€Êµî$
crm
Customer records	crm-tools